//! The unit tests of `src/cookies/receipt.rs`.

use super::*;

fn receipt() -> Receipt {
    Receipt {
        group: "tenant-a/pod:abc:expeller".into(),
        init: TaskId { pid: 4242, start_time: 777 },
        cookie: 0x5eed,
        cache: (64, 123),
    }
}

#[test]
fn a_receipt_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "c1", &receipt()).unwrap();
    assert_eq!(read(dir.path(), "c1"), Some(receipt()));
    remove(dir.path(), "c1");
    assert_eq!(read(dir.path(), "c1"), None);
    remove(dir.path(), "c1");
}

#[test]
fn a_torn_or_foreign_receipt_is_no_receipt() {
    let full = receipt().render();
    for cut in 0..full.len() {
        assert_eq!(Receipt::parse(&full[..cut]), None, "{:?}", &full[..cut]);
    }
    for bad in ["v2 1 2 3 4 5 g\n", "v1 1 2 zz 4 5 g\n", "v1 1 2 3 4 5 g extra\n", "v1 1 2 3 4 5 \n"] {
        assert_eq!(Receipt::parse(bad), None, "{bad:?}");
    }
}
