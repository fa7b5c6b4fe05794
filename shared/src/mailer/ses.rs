//! SES v2 mailer adapter (in progress).
