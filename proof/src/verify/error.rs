//! Why a run of the model check could not give an answer.

/// Why a run could not give an answer (as opposed to finding a violation).
#[derive(Debug, thiserror::Error)]
pub(super) enum VerifyError {
    #[error("could not build the world: {0}")]
    Setup(String),
    #[error("the sender did something the model does not cover: {0}")]
    Unexpected(String),
    #[error("outside the model's bounds: {0}")]
    Bound(String),
    #[error("a value the model did not hand out: {0}")]
    Corrupt(String),
}
