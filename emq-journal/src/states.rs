//! Router state other than jobs (`Record::PutState` rows), as both stores
//! read it back: rows whose kind this build does not know (written by a
//! newer router sharing the journal) are skipped with a warning rather
//! than failing the start, so a rollback of the binary keeps working.

use emq_router_core::journal::StateKind;

/// The rows a store read, `(kind name, id, blob)`, typed; unknown kinds
/// dropped (logged once per kind).
pub(crate) fn known_states(
    rows: Vec<(String, String, Vec<u8>)>,
) -> Vec<(StateKind, String, Vec<u8>)> {
    let mut unknown: Vec<String> = Vec::new();
    let known = rows
        .into_iter()
        .filter_map(|(kind, id, blob)| match StateKind::parse(&kind) {
            Some(k) => Some((k, id, blob)),
            None => {
                if !unknown.contains(&kind) {
                    unknown.push(kind);
                }
                None
            }
        })
        .collect();
    for kind in unknown {
        log::warn!("journal: state rows of kind {kind:?} are unknown to this emq and are skipped");
    }
    known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_are_skipped_and_known_ones_typed() {
        let rows = vec![
            ("queue-policy".to_string(), "q".to_string(), b"p".to_vec()),
            (
                "from-the-future".to_string(),
                "x".to_string(),
                b"?".to_vec(),
            ),
            ("unique-key".to_string(), "k".to_string(), b"u".to_vec()),
        ];
        assert_eq!(
            known_states(rows),
            vec![
                (StateKind::QueuePolicy, "q".to_string(), b"p".to_vec()),
                (StateKind::UniqueKey, "k".to_string(), b"u".to_vec()),
            ]
        );
    }
}
