//! `emq-cli completions SHELL` and `emq-cli man` print what clap_complete
//! and clap_mangen generate from the command line definition.

use std::time::Duration;

use emq_testkit::process::run_to_exit;
use emq_testkit::Spawn;

/// emq-cli run to its exit (within 30 s): its code and stdout.
fn emq_cli(args: &[&str]) -> (Option<i32>, String) {
    let spawn = Spawn::new("emq-cli", env!("CARGO_BIN_EXE_emq-cli"))
        .args(args)
        .env("EVENTMQ_CONFIG_FILE", "/dev/null");
    let out = run_to_exit(spawn, Duration::from_secs(30));
    (out.code(), out.stdout)
}

#[test]
fn completions_know_the_subcommands_and_values() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, text) = emq_cli(&["completions", shell]);
        assert_eq!(code, Some(0), "{shell}");
        // (fish spells a long option `-l admin`)
        for word in ["emq-cli", "unschedule", "undrain", "admin", "timeout"] {
            assert!(text.contains(word), "{shell} completion lacks {word}");
        }
    }
    // Possible values of --state come from the same definition.
    let (_, bash) = emq_cli(&["completions", "bash"]);
    assert!(bash.contains("dead-lettered") && bash.contains("in-flight"));
}

#[test]
fn the_man_page_documents_commands_and_exit_codes() {
    let (code, roff) = emq_cli(&["man"]);
    assert_eq!(code, Some(0));
    assert!(roff.contains(".TH emq-cli 1"));
    for word in ["Exit codes", "ROUTER_SHOW_WORKERS", "purge", "shutdown"] {
        assert!(roff.contains(word), "the man page lacks {word}");
    }
}
