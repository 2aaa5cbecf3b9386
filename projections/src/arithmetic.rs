//! The error of a checked operation ([`ArithmeticError`]): what every
//! overflow of exact arithmetic is, whichever module computed it (the
//! decimal helpers of [`crate::decimal`], which re-exports it, and the exact
//! sums of `exact.rs`).

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("arithmetic overflow in {operation}")]
pub struct ArithmeticError {
    pub operation: &'static str,
}
