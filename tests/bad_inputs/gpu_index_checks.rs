//! (filled in by the hardening work)
