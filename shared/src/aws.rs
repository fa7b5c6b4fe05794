//! AWS SDK configuration shared by every adapter (in progress).
