//! The unit tests of `src/agent/nri/proto.rs`.

use super::*;

fn fields(bytes: &[u8]) -> Result<Vec<(u32, Value<'_>)>, DecodeError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

#[test]
fn varints_round_trip_at_their_edges() {
    for v in [1u64, 127, 128, 300, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
        let mut w = Writer::new();
        w.varint(1, v);
        let bytes = w.finish();
        assert_eq!(fields(&bytes).unwrap(), [(1, Value::Varint(v))], "{v}");
    }
    let mut w = Writer::new();
    w.varint(1, 300);
    assert_eq!(w.finish(), [0x08, 0xac, 0x02], "the protobuf documentation's example");
}

#[test]
fn every_wire_type_is_skipped_when_unknown() {
    let mut w = Writer::new();
    w.raw(&[0x08, 0x96, 0x01]); // 1: varint 150
    w.raw(&[0x11, 1, 2, 3, 4, 5, 6, 7, 8]); // 2: fixed64
    w.raw(&[0x1a, 0x02, b'h', b'i']); // 3: len "hi"
    w.raw(&[0x23, 0x08, 0x01, 0x2b, 0x2c, 0x24]); // 4: group holding field 1 and an empty group 5
    w.raw(&[0x2d, 9, 9, 9, 9]); // 5: fixed32
    w.string(6, "kept");
    let bytes = w.finish();
    let got = fields(&bytes).unwrap().into_iter().map(|(f, _)| f).collect::<Vec<_>>();
    assert_eq!(got, [1, 2, 3, 5, 6], "the group is skipped whole, every other field is returned");
}

#[test]
fn malformed_input_is_an_error_never_a_panic() {
    let cases: &[(&[u8], DecodeError)] = &[
        (&[0x08], DecodeError::Truncated("a varint field")),
        (&[0x08, 0x80], DecodeError::Truncated("a varint field")),
        (&[0x0a, 0x05, b'a'], DecodeError::Truncated("a length-delimited field")),
        (&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], DecodeError::Truncated("a length-delimited field")),
        (&[0x11, 1, 2], DecodeError::Truncated("a fixed64 field")),
        (&[0x15, 1], DecodeError::Truncated("a fixed32 field")),
        (&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], DecodeError::VarintTooLong),
        (&[0x00, 0x01], DecodeError::FieldNumber(0)),
        (&[0x0e], DecodeError::BadWireType { field: 1, wire_type: 6 }),
        (&[0x0f], DecodeError::BadWireType { field: 1, wire_type: 7 }),
        (&[0x0c], DecodeError::Group(1)),
        (&[0x0b, 0x08, 0x01], DecodeError::Truncated("a group")),
        (&[0x0b, 0x14], DecodeError::Group(2)),
        (&[0x80], DecodeError::Truncated("a field key")),
    ];
    for (bytes, want) in cases {
        assert_eq!(fields(bytes).unwrap_err(), *want, "{bytes:02x?}");
    }
    let deep: Vec<u8> = std::iter::repeat_n(0x0b, MAX_GROUP_DEPTH + 1).collect();
    assert_eq!(fields(&deep).unwrap_err(), DecodeError::Group(1));
}

#[test]
fn typed_accessors_check_the_wire_type_and_utf8() {
    assert_eq!(
        Value::Varint(1).string(4).unwrap_err(),
        DecodeError::WrongWireType { field: 4, got: VARINT, expected: LEN }
    );
    assert_eq!(
        Value::Len(b"x").varint(2).unwrap_err(),
        DecodeError::WrongWireType { field: 2, got: LEN, expected: VARINT }
    );
    assert_eq!(Value::Len(&[0xff]).string(3).unwrap_err(), DecodeError::Utf8(3));
}

#[test]
fn maps_are_entries_in_key_order() {
    let map = BTreeMap::from([("b".to_string(), "2".to_string()), ("a".to_string(), String::new())]);
    let mut w = Writer::new();
    w.map(6, &map);
    let bytes = w.finish();
    // Entry a: key only (an empty value is left out); entry b: key and value.
    assert_eq!(bytes, [0x32, 0x03, 0x0a, 0x01, b'a', 0x32, 0x06, 0x0a, 0x01, b'b', 0x12, 0x01, b'2']);
    let entries: Vec<(String, String)> =
        fields(&bytes).unwrap().iter().map(|(_, v)| map_entry(v.bytes(6).unwrap()).unwrap()).collect();
    assert_eq!(entries, [("a".into(), "".into()), ("b".into(), "2".into())]);
}
