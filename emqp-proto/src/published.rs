//! Pub/sub as EventMQ 0.3.13 does it: a publisher sends `PUBLISH [topic,
//! message]` (an ordinary eMQP message, see [`crate::Command::Publish`]) to
//! the pub/sub process's ROUTER socket, which sends `[topic, message]` —
//! two frames, no eMQP envelope, no msgid — on its PUB socket. Subscribers
//! are plain zmq SUB sockets: libzmq matches their subscriptions as byte
//! prefixes of the first frame, the topic. Nobody answers a PUBLISH, and a
//! message published while no subscriber matches is dropped (PUB
//! semantics).
//!
//! [`Published`] is that two-frame message; 0.3.13 passes the topic and
//! the message through unchanged (`tests/vectors/publisher.json`).

use crate::error::DecodeError;

/// A message as the pub/sub process's PUB socket sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The first frame, which subscriptions match by prefix.
    pub topic: Vec<u8>,
    /// The PUBLISH's message frame, unchanged (JSON text from 0.3.13's
    /// client).
    pub message: Vec<u8>,
}

impl Published {
    /// What a PUBLISH [topic, message] becomes on the PUB socket.
    pub fn of_publish(topic: String, message: Vec<u8>) -> Published {
        Published {
            topic: topic.into_bytes(),
            message,
        }
    }

    /// The two frames to send on a PUB socket.
    pub fn encode(self) -> Vec<Vec<u8>> {
        vec![self.topic, self.message]
    }

    /// The frames a SUB socket received: exactly two.
    pub fn decode(frames: Vec<Vec<u8>>) -> Result<Published, DecodeError> {
        let got = frames.len();
        if got != 2 {
            return Err(DecodeError::WrongFrameCount {
                what: "published message",
                expected: 2,
                got,
            });
        }
        let mut it = frames.into_iter();
        Ok(Published {
            topic: it.next().unwrap_or_default(),
            message: it.next().unwrap_or_default(),
        })
    }

    /// Whether a SUB socket subscribed to `prefix` receives this message
    /// (libzmq's rule: the topic frame starts with the subscription; the
    /// empty subscription matches everything).
    pub fn matches(&self, prefix: &[u8]) -> bool {
        self.topic.starts_with(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_frames_in_and_out() {
        let p = Published::of_publish("news".into(), b"{}".to_vec());
        let frames = p.clone().encode();
        assert_eq!(frames, vec![b"news".to_vec(), b"{}".to_vec()]);
        assert_eq!(Published::decode(frames), Ok(p));
        // an empty topic is a topic (every subscriber matches it)
        assert!(Published::decode(vec![vec![], b"x".to_vec()]).is_ok());
    }

    #[test]
    fn other_frame_counts_are_typed_errors() {
        for n in [0, 1, 3, 7] {
            assert_eq!(
                Published::decode(vec![b"f".to_vec(); n]),
                Err(DecodeError::WrongFrameCount {
                    what: "published message",
                    expected: 2,
                    got: n
                })
            );
        }
    }

    #[test]
    fn subscriptions_match_by_prefix() {
        let p = Published::of_publish("news.sports".into(), vec![]);
        assert!(p.matches(b""));
        assert!(p.matches(b"news"));
        assert!(p.matches(b"news.sports"));
        assert!(!p.matches(b"news.sports.x"));
        assert!(!p.matches(b"weather"));
    }
}
