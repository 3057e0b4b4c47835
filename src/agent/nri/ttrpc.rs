//! ttrpc's envelope, as ttrpc's `request.proto` defines it: every call is a [`Request`] naming a
//! service and a method around the encoded argument, and every answer a [`Response`] with the
//! encoded result or a [`Status`] (gRPC's status: code and message). Framing is [`super::wire`]'s.

use super::proto::{DecodeError, Message, Value, Writer};

/// gRPC status codes ttrpc uses.
pub mod code {
    /// `OK`.
    pub const OK: i32 = 0;
    /// `UNKNOWN`.
    pub const UNKNOWN: i32 = 2;
    /// `INVALID_ARGUMENT`.
    pub const INVALID_ARGUMENT: i32 = 3;
    /// `RESOURCE_EXHAUSTED`.
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// `UNIMPLEMENTED`.
    pub const UNIMPLEMENTED: i32 = 12;
}

fn int32(v: i32) -> u64 {
    i64::from(v) as u64
}

/// ttrpc's request envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// 1: the service name.
    pub service: String,
    /// 2: the method name.
    pub method: String,
    /// 3: the encoded request message.
    pub payload: Vec<u8>,
    /// 4: the caller's timeout in nanoseconds (0: none).
    pub timeout_nano: i64,
}

impl Message for Request {
    fn encode(&self, w: &mut Writer) {
        w.string(1, &self.service);
        w.string(2, &self.method);
        w.bytes(3, &self.payload);
        w.varint(4, self.timeout_nano as u64);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.service = v.string(1)?,
            2 => self.method = v.string(2)?,
            3 => self.payload = v.bytes(3)?.to_vec(),
            4 => self.timeout_nano = v.varint(4)? as i64,
            _ => {}
        }
        Ok(())
    }
}

/// The status of a ttrpc response (gRPC's `Status`: code and message; details are skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// 1: the gRPC code.
    pub code: i32,
    /// 2: what went wrong.
    pub message: String,
}

impl Message for Status {
    fn encode(&self, w: &mut Writer) {
        w.varint(1, int32(self.code));
        w.string(2, &self.message);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.code = v.varint(1)? as i32,
            2 => self.message = v.string(2)?,
            _ => {}
        }
        Ok(())
    }
}

/// ttrpc's response envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    /// 1: the status (absent: OK).
    pub status: Option<Status>,
    /// 2: the encoded response message.
    pub payload: Vec<u8>,
}

impl Response {
    /// A successful response carrying `message`.
    pub fn ok(message: &impl Message) -> Self {
        Self { status: None, payload: message.to_bytes() }
    }

    /// A failed response.
    pub fn error(code: i32, message: impl Into<String>) -> Self {
        Self { status: Some(Status { code, message: message.into() }), payload: Vec::new() }
    }

    /// The status code (0 when there is no status).
    pub fn code(&self) -> i32 {
        self.status.as_ref().map_or(code::OK, |s| s.code)
    }
}

impl Message for Response {
    fn encode(&self, w: &mut Writer) {
        if let Some(s) = &self.status {
            w.message(1, &s.to_bytes());
        }
        w.bytes(2, &self.payload);
    }
    fn merge(&mut self, field: u32, v: Value<'_>) -> Result<(), DecodeError> {
        match field {
            1 => self.status = Some(Status::decode(v.bytes(1)?)?),
            2 => self.payload = v.bytes(2)?.to_vec(),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "ttrpc_tests.rs"]
mod tests;
