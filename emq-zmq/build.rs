//! Link libsodium, which the vendored libzmq calls for CURVE
//! (`.cargo/config.toml` builds it with ZMQ_HAVE_CURVE and
//! ZMQ_USE_LIBSODIUM). Static, so that the binaries need nothing at run
//! time; `-bundle` puts `-lsodium` after every crate's objects on the
//! linker's command line, where libzmq (inside zmq-sys) needs it.
//! Every crate that links zmq links this crate.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.contains("linux") {
        // Elsewhere libzmq is built as zmq-sys builds it (no CURVE).
        return;
    }
    let found = ["/usr/include/sodium.h", "/usr/local/include/sodium.h"]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
    if !found {
        println!(
            "cargo:warning=libsodium's headers are missing: install libsodium-dev \
             (scripts/ensure-deps.sh does); libzmq's CURVE needs them"
        );
    }
    println!("cargo:rustc-link-lib=static:-bundle=sodium");
}
