//! Whole runs of the model, small enough for the debug suite.
