//! The workspace's ZeroMQ: the `zmq` crate, re-exported whole, and the one
//! place that links libsodium, which the vendored libzmq calls for CURVE
//! (see `build.rs` and `.cargo/config.toml`).
//!
//! Every crate of the workspace depends on this crate under the name `zmq`
//! (`zmq = { package = "emq-zmq", … }` in the workspace's
//! `[workspace.dependencies]`), so `use zmq::…` is unchanged, and whatever
//! uses zmq links libsodium with it: no crate has to name another one only
//! to get the link.

#![forbid(unsafe_code)]

pub use zmq::*;

#[cfg(test)]
mod tests {
    /// The libzmq we link has CURVE, and a CURVE key pair can be made
    /// (which calls into libsodium: without the link this does not build).
    #[test]
    fn libzmq_has_curve_and_libsodium_is_linked() {
        assert!(super::has("curve").unwrap_or(false));
        let pair = super::CurveKeyPair::new().expect("libsodium makes a key pair");
        assert_ne!(pair.public_key, [0u8; 32]);
    }
}
