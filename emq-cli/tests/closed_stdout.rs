//! Issue 32: `emq-cli man | head` printed "Broken pipe". The real binary
//! with its stdout already closed by the reader: exit 0, nothing on
//! stderr, for `man` and `completions`.

use std::process::{Command, Stdio};
use std::time::Duration;

use emq_testkit::ChildGuard;

const BIN: &str = env!("CARGO_BIN_EXE_emq-cli");

fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader); // the reader is gone before the first write
    let mut child = ChildGuard(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn emq-cli"),
    );
    let err = emq_testkit::lines::reader(child.0.stderr.take().unwrap());
    let code = child.wait_exit(Duration::from_secs(30));
    drop(child);
    (code, err.join().unwrap())
}

#[test]
fn a_closed_stdout_ends_man_and_completions_quietly() {
    for args in [&["man"][..], &["completions", "bash"][..]] {
        let (code, stderr) = with_closed_stdout(args);
        assert_eq!(code, Some(0), "{args:?}: stderr: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}
