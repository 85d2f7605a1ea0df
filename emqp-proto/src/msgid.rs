//! Message ids: EventMQ uses `str(uuid.uuid4())`, 36 lower-case hex chars.

/// A fresh random message id in the form EventMQ 0.3.13 uses.
pub fn new_msgid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msgid_is_uuid4_text_and_unique() {
        let a = new_msgid();
        let b = new_msgid();
        assert_eq!(a.len(), 36);
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a, a.to_lowercase());
    }
}
