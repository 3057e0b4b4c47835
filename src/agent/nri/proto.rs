//! The protobuf wire format, as far as the NRI plugin needs it: a [`Reader`] that walks the fields
//! of one message and a [`Writer`] that appends fields. Written from the protobuf encoding rules
//! (varints, the four live wire types and the two deprecated group markers), not from generated
//! code.
//!
//! Decoding is strict about what it uses and lenient about the rest: every field of every wire
//! type that the caller does not ask for is skipped (so a newer runtime's additions pass through),
//! while truncated input, a varint over 10 bytes, field number 0, an unbalanced group, a known
//! field of the wrong wire type and a string that is not UTF-8 are errors. Nothing here allocates
//! more than the input's own length.

use std::collections::BTreeMap;

/// Varint (int32, int64, uint32, uint64, bool, enum).
pub const VARINT: u8 = 0;
/// Eight bytes little-endian (fixed64, sfixed64, double).
pub const FIXED64: u8 = 1;
/// A varint length, then that many bytes (string, bytes, messages, packed repeated fields).
pub const LEN: u8 = 2;
/// Start of a group (deprecated; only skipped).
const START_GROUP: u8 = 3;
/// End of a group (deprecated; only skipped).
const END_GROUP: u8 = 4;
/// Four bytes little-endian (fixed32, sfixed32, float).
pub const FIXED32: u8 = 5;

/// Deepest nesting of groups that is skipped before the input is called malformed.
const MAX_GROUP_DEPTH: usize = 32;

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends in the middle of something.
    #[error("failed to decode a protobuf message: the input ends inside {0}")]
    Truncated(&'static str),
    /// A varint runs past 10 bytes.
    #[error("failed to decode a protobuf message: a varint is longer than 10 bytes")]
    VarintTooLong,
    /// Field number 0, or one above 2^29 - 1.
    #[error("failed to decode a protobuf message: field number {0} is out of range")]
    FieldNumber(u64),
    /// Wire type 6 or 7.
    #[error("failed to decode a protobuf message: field {field} has wire type {wire_type}, which does not exist")]
    BadWireType {
        /// The field number.
        field: u32,
        /// The wire type.
        wire_type: u8,
    },
    /// A field the decoder uses came with another wire type than its schema says.
    #[error("failed to decode a protobuf message: field {field} has wire type {got}, expected {expected}")]
    WrongWireType {
        /// The field number.
        field: u32,
        /// What the input had.
        got: u8,
        /// What the schema says.
        expected: u8,
    },
    /// An end-group marker without its start, or groups nested too deep.
    #[error("failed to decode a protobuf message: unbalanced or too deeply nested group at field {0}")]
    Group(u32),
    /// A string field is not UTF-8.
    #[error("failed to decode a protobuf message: field {0} is not valid UTF-8")]
    Utf8(u32),
}

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2.
    Len(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

impl<'a> Value<'a> {
    fn wire_type(&self) -> u8 {
        match self {
            Value::Varint(_) => VARINT,
            Value::Fixed64(_) => FIXED64,
            Value::Len(_) => LEN,
            Value::Fixed32(_) => FIXED32,
        }
    }

    fn wrong(&self, field: u32, expected: u8) -> DecodeError {
        DecodeError::WrongWireType { field, got: self.wire_type(), expected }
    }

    /// A varint field (uint32/64, int64, enum, bool).
    pub fn varint(&self, field: u32) -> Result<u64, DecodeError> {
        match self {
            Value::Varint(v) => Ok(*v),
            other => Err(other.wrong(field, VARINT)),
        }
    }

    /// A length-delimited field's bytes (bytes, or a nested message to decode).
    pub fn bytes(&self, field: u32) -> Result<&'a [u8], DecodeError> {
        match self {
            Value::Len(b) => Ok(b),
            other => Err(other.wrong(field, LEN)),
        }
    }

    /// A string field.
    pub fn string(&self, field: u32) -> Result<String, DecodeError> {
        let b = self.bytes(field)?;
        std::str::from_utf8(b).map(str::to_string).map_err(|_| DecodeError::Utf8(field))
    }
}

/// Walks the fields of one encoded message in order.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over one message's bytes.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else { return Err(DecodeError::Truncated(what)) };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintTooLong)
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            return Err(DecodeError::Truncated(what));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn key(&mut self) -> Result<(u32, u8), DecodeError> {
        let key = self.varint("a field key")?;
        let field = key >> 3;
        if field == 0 || field > (1 << 29) - 1 {
            return Err(DecodeError::FieldNumber(field));
        }
        Ok((field as u32, (key & 7) as u8))
    }

    /// The value of a field with this wire type (groups are skipped by the caller).
    fn value(&mut self, field: u32, wire_type: u8) -> Result<Value<'a>, DecodeError> {
        Ok(match wire_type {
            VARINT => Value::Varint(self.varint("a varint field")?),
            FIXED64 => {
                let b = self.take(8, "a fixed64 field")?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            LEN => {
                let n = self.varint("a length")?;
                Value::Len(self.take(n, "a length-delimited field")?)
            }
            FIXED32 => {
                let b = self.take(4, "a fixed32 field")?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes")))
            }
            _ => return Err(DecodeError::BadWireType { field, wire_type }),
        })
    }

    /// Skips a group whose start marker (of `field`) was just read, nested groups included.
    fn skip_group(&mut self, field: u32) -> Result<(), DecodeError> {
        let mut open = vec![field];
        while let Some(&top) = open.last() {
            let (f, wt) = self.key().map_err(|e| match e {
                DecodeError::Truncated(_) => DecodeError::Truncated("a group"),
                e => e,
            })?;
            match wt {
                START_GROUP if open.len() < MAX_GROUP_DEPTH => open.push(f),
                START_GROUP => return Err(DecodeError::Group(f)),
                END_GROUP if f == top => {
                    open.pop();
                }
                END_GROUP => return Err(DecodeError::Group(f)),
                _ => {
                    self.value(f, wt)?;
                }
            }
        }
        Ok(())
    }

    /// The next field (number and value), `None` at the end of the message. Groups are skipped.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, DecodeError> {
        loop {
            if self.pos == self.buf.len() {
                return Ok(None);
            }
            let (field, wt) = self.key()?;
            match wt {
                START_GROUP => self.skip_group(field)?,
                END_GROUP => return Err(DecodeError::Group(field)),
                _ => return Ok(Some((field, self.value(field, wt)?))),
            }
        }
    }
}

/// Decodes one `map<string, string>` entry (key 1, value 2; either may be absent).
pub fn map_entry(bytes: &[u8]) -> Result<(String, String), DecodeError> {
    let (mut k, mut v) = (String::new(), String::new());
    let mut r = Reader::new(bytes);
    while let Some((f, val)) = r.next()? {
        match f {
            1 => k = val.string(1)?,
            2 => v = val.string(2)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// Appends fields to a message. Scalars at their default value (0, "", false) are left out, as
/// proto3 encoders do; nested messages are always written when given.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.raw_varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    /// A varint field (uint32/64, enum; an int32/int64 is passed as its two's complement).
    pub fn varint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, VARINT);
            self.raw_varint(v);
        }
    }

    /// A bool field.
    pub fn bool(&mut self, field: u32, v: bool) {
        self.varint(field, u64::from(v));
    }

    /// A bytes field.
    pub fn bytes(&mut self, field: u32, v: &[u8]) {
        if !v.is_empty() {
            self.len_field(field, v);
        }
    }

    /// A string field.
    pub fn string(&mut self, field: u32, v: &str) {
        self.bytes(field, v.as_bytes());
    }

    /// One element of a repeated string field (written even when empty).
    pub fn repeated_string(&mut self, field: u32, v: &str) {
        self.len_field(field, v.as_bytes());
    }

    /// A nested message (written even when empty: presence is meaningful).
    pub fn message(&mut self, field: u32, encoded: &[u8]) {
        self.len_field(field, encoded);
    }

    /// A `map<string, string>` field, one entry per key, in key order.
    pub fn map(&mut self, field: u32, map: &BTreeMap<String, String>) {
        for (k, v) in map {
            let mut e = Writer::new();
            e.string(1, k);
            e.string(2, v);
            self.message(field, &e.finish());
        }
    }

    fn len_field(&mut self, field: u32, v: &[u8]) {
        self.key(field, LEN);
        self.raw_varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Appends raw bytes (tests build malformed input with this).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

/// A protobuf message: encoded field by field, decoded by merging each field it knows.
pub trait Message: Sized + Default {
    /// Appends this message's fields.
    fn encode(&self, w: &mut Writer);

    /// Takes one field of the input; fields it does not know are ignored.
    fn merge(&mut self, field: u32, value: Value<'_>) -> Result<(), DecodeError>;

    /// The encoded message.
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.finish()
    }

    /// Decodes a message.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        let mut r = Reader::new(bytes);
        while let Some((field, value)) = r.next()? {
            m.merge(field, value)?;
        }
        Ok(m)
    }
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
