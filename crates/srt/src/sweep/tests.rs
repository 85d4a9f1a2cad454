use super::*;

/// A P/D point: one prefill worker (hash `p`), two decode workers (hash `d`), a Router
/// whose hash follows the decodes (its workers are on its command line).
fn pd(p: &str, d: &str) -> Shape {
    Shape::from_processes(
        [
            (
                "worker.prefill[0].node[0]".to_string(),
                Kind::Worker,
                p.to_string(),
            ),
            (
                "worker.decode[0].node[0]".to_string(),
                Kind::Worker,
                d.to_string(),
            ),
            (
                "worker.decode[1].node[0]".to_string(),
                Kind::Worker,
                d.to_string(),
            ),
            ("router[0]".to_string(), Kind::Ports, format!("r{p}{d}")),
        ],
        3,
    )
}

#[test]
fn a_step_starts_only_what_changed() {
    let a = pd("p1", "d1");
    let b = pd("p1", "d2");
    let first = step(None, &a);
    assert_eq!(first.worker_starts, 3);
    let s = step(Some(&a), &b);
    assert_eq!(s.worker_starts, 2);
    assert_eq!(s.workers_kept, 1);
    assert_eq!(
        s.starts,
        [
            "router[0]",
            "worker.decode[0].node[0]",
            "worker.decode[1].node[0]"
        ]
    );
    assert_eq!(step(Some(&b), &b).worker_starts, 0);
    assert!(step(Some(&b), &b).starts.is_empty());
}

#[test]
fn points_are_reordered_only_when_it_starts_fewer_workers() {
    // Written decode-inner: every step changes the decodes, every other one the prefill.
    let shapes = [
        pd("p1", "d1"),
        pd("p2", "d1"),
        pd("p1", "d2"),
        pd("p2", "d2"),
    ];
    let o = order(&shapes);
    assert_eq!(o.written_worker_starts, 3 + 1 + 3 + 1);
    assert_eq!(o.points, [0, 1, 3, 2]);
    assert_eq!(o.worker_starts, 3 + 1 + 2 + 1);
    assert!(o.reordered());
    // Already the best order: kept as written.
    let shapes = [
        pd("p1", "d1"),
        pd("p1", "d1"),
        pd("p1", "d2"),
        pd("p1", "d2"),
    ];
    let o = order(&shapes);
    assert_eq!(o.points, [0, 1, 2, 3]);
    assert!(!o.reordered());
    assert_eq!(o.worker_starts, 3 + 2); // the second and fourth points start nothing
    assert_eq!(fresh_starts(&shapes), 12);
}

#[test]
fn points_of_one_deployment_share_a_curve_named_by_what_they_share() {
    let shapes = [pd("p", "d1"), pd("p", "d1"), pd("p", "d2"), pd("p", "d2")];
    let params: Vec<Vec<(String, String)>> = [("8", "1"), ("8", "4"), ("16", "1"), ("16", "4")]
        .iter()
        .map(|(s, c)| {
            vec![
                ("seqs".to_string(), s.to_string()),
                ("conc".to_string(), c.to_string()),
            ]
        })
        .collect();
    assert_eq!(
        curves(&shapes, &params),
        ["seqs=8", "seqs=8", "seqs=16", "seqs=16"]
    );
}
