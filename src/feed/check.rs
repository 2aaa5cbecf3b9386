//! `navd feed-check`: reads the change feed from the start into an empty
//! replica by the consumer's rule and compares every portfolio with what
//! the API serves.
