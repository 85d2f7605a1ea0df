//! The envelope: `'' | eMQP/1.0 | COMMAND | MSGID | body...`, optionally
//! preceded by the peer identity a ROUTER socket prepends.

use crate::command::Command;
use crate::error::{excerpt, utf8, DecodeError};
use crate::msgid::new_msgid;
use crate::PROTOCOL_VERSION;

/// One eMQP message: its own msgid and a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub msgid: String,
    pub command: Command,
}

/// Frames before the body: delimiter, protocol, command, msgid.
const HEADER_FRAMES: usize = 4;

impl Message {
    /// A message with a fresh uuid4 msgid.
    pub fn new(command: Command) -> Message {
        Message {
            msgid: new_msgid(),
            command,
        }
    }

    pub fn with_msgid(msgid: impl Into<String>, command: Command) -> Message {
        Message {
            msgid: msgid.into(),
            command,
        }
    }

    /// Decode frames as a DEALER sees them (starting with the delimiter).
    pub fn decode(frames: Vec<Vec<u8>>) -> Result<Message, DecodeError> {
        if frames.len() < HEADER_FRAMES {
            return Err(DecodeError::TooFewFrames {
                command: None,
                expected: HEADER_FRAMES,
                got: frames.len(),
            });
        }
        let mut it = frames.into_iter();
        let delimiter = it.next().unwrap_or_default();
        if !delimiter.is_empty() {
            return Err(DecodeError::MissingDelimiter);
        }
        let protocol = it.next().unwrap_or_default();
        if protocol != PROTOCOL_VERSION.as_bytes() {
            return Err(DecodeError::BadProtocolVersion(excerpt(&protocol)));
        }
        let name = it.next().unwrap_or_default();
        let msgid = utf8(it.next().unwrap_or_default(), "msgid")?;
        let command = Command::decode(&name, it.collect())?;
        Ok(Message { msgid, command })
    }

    /// Decode frames as a ROUTER sees them: `[identity, '', eMQP/1.0, ...]`.
    /// The identity is returned as raw bytes (our peers use uuid4 text, but
    /// libzmq may assign binary ones).
    pub fn decode_routed(mut frames: Vec<Vec<u8>>) -> Result<(Vec<u8>, Message), DecodeError> {
        if frames.is_empty() {
            return Err(DecodeError::TooFewFrames {
                command: None,
                expected: HEADER_FRAMES + 1,
                got: 0,
            });
        }
        let identity = frames.remove(0);
        Message::decode(frames).map(|m| (identity, m))
    }

    /// Encode as a DEALER sends it.
    pub fn encode(self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(HEADER_FRAMES + 5);
        self.encode_into(&mut out);
        out
    }

    /// Encode as a ROUTER sends it, addressed to `identity`.
    pub fn encode_routed(self, identity: Vec<u8>) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(HEADER_FRAMES + 6);
        out.push(identity);
        self.encode_into(&mut out);
        out
    }

    fn encode_into(self, out: &mut Vec<Vec<u8>>) {
        out.push(Vec::new());
        out.push(PROTOCOL_VERSION.as_bytes().to_vec());
        out.push(self.command.name().as_bytes().to_vec());
        out.push(self.msgid.into_bytes());
        self.command.encode_body(out);
    }
}
