//! A child's output as events: whole lines on a channel, or all of it once
//! the pipe closes, so a test waits for what it expects instead of sleeping.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;
use std::thread;

/// Each line of `r` sent on the returned channel as it arrives.
pub fn line_reader<R: Read + Send + 'static>(r: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// All of `r`, returned by the thread when the pipe closes.
pub fn reader<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}
