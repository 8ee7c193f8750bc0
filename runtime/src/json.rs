//! JSON answers written straight to bytes, in the byte order the service has always sent.
//!
//! Every answer used to go through `serde_json::Value`: the action's output was converted into a
//! tree of maps and strings (one allocation per key and per string), and that tree was then
//! written out. The tree's maps are `BTreeMap`s, so the bytes on the wire have every object's
//! keys in sorted order, not in the order of the Rust fields; clients have seen those bytes since
//! the first release, and the golden files hold them. [`to_vec`] writes the same bytes without
//! the tree: keys are written as they come, and only an object whose keys did not come sorted is
//! reordered in place (with the last of repeated keys kept, as a map insert would). For a page of
//! 200 prospects that is one buffer instead of some ten thousand small allocations.
//!
//! The promise is exact: `to_vec(x)` equals `serde_json::to_vec(&serde_json::to_value(x)?)` for
//! every value, and the tests below hold it to that. The few shapes that convert in ways not
//! worth repeating here (a float or 128-bit map key, a 128-bit number) take the tree path.

use std::borrow::Cow;

use axum::body::Bytes;
use serde::ser::{self, Serialize};
use serde_json::Value;

/// A JSON answer, written once ([`to_vec`]): the bytes every face sends and an idempotent call
/// stores. A tree is made from it only where one is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonBody(Bytes);

impl JsonBody {
    /// `value` written as JSON.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        to_vec(value).map(|bytes| Self(Bytes::from(bytes)))
    }

    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// The JSON text (serde_json writes UTF-8 only).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("null")
    }

    /// The answer as a tree.
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.0).unwrap_or(Value::Null)
    }
}

/// The bytes `serde_json::to_vec(&serde_json::to_value(value)?)` gives, written directly.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut writer = Writer {
        out: Vec::with_capacity(256),
        entries: Vec::new(),
    };
    match value.serialize(&mut writer) {
        Ok(()) => Ok(writer.out),
        Err(Error::Tree) => serde_json::to_vec(&serde_json::to_value(value)?),
        Err(Error::Json(error)) => Err(error),
    }
}

/// Why writing stopped: an error `to_value` would also give, or a shape left to the tree path.
#[derive(Debug)]
enum Error {
    Json(serde_json::Error),
    Tree,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Json(error) => error.fmt(f),
            Error::Tree => f.write_str("left to the tree path"),
        }
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        Error::Json(<serde_json::Error as ser::Error>::custom(message))
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Error::Json(error)
    }
}

/// One member of an object being written: its key and where `"key":value` sits in the buffer.
struct Entry {
    key: Cow<'static, str>,
    start: usize,
    end: usize,
}

struct Writer {
    out: Vec<u8>,
    /// The members of every object still open, innermost last.
    entries: Vec<Entry>,
}

impl Writer {
    fn scalar(&mut self) -> serde_json::Serializer<&mut Vec<u8>> {
        serde_json::Serializer::new(&mut self.out)
    }

    fn string(&mut self, text: &str) -> Result<(), Error> {
        ser::Serializer::serialize_str(&mut self.scalar(), text)?;
        Ok(())
    }

    fn open_object(&mut self) -> Object<'_> {
        self.out.push(b'{');
        let base = self.entries.len();
        Object {
            writer: self,
            base,
            key: None,
        }
    }
}

/// An object being written: members go into the buffer in the order they come.
struct Object<'a> {
    writer: &'a mut Writer,
    /// Where this object's members start in `writer.entries`.
    base: usize,
    /// A map's key, between `serialize_key` and `serialize_value`.
    key: Option<Cow<'static, str>>,
}

impl<'a> Object<'a> {
    fn member<T: Serialize + ?Sized>(
        &mut self,
        key: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Error> {
        if self.writer.entries.len() > self.base {
            self.writer.out.push(b',');
        }
        let start = self.writer.out.len();
        if key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
        {
            // A field name: nothing to escape.
            self.writer.out.push(b'"');
            self.writer.out.extend_from_slice(key.as_bytes());
            self.writer.out.extend_from_slice(b"\":");
        } else {
            self.writer.string(&key)?;
            self.writer.out.push(b':');
        }
        value.serialize(&mut *self.writer)?;
        let end = self.writer.out.len();
        self.writer.entries.push(Entry { key, start, end });
        Ok(())
    }

    /// Closes the object, putting its members in key order if they did not come in it.
    fn close(self) -> Result<&'a mut Writer, Error> {
        let Object { writer, base, .. } = self;
        let members = &mut writer.entries[base..];
        let in_order = members
            .windows(2)
            .all(|pair| pair[0].key.as_bytes() < pair[1].key.as_bytes());
        if !in_order {
            // Where the first member was written, before the sort moves it.
            let first = members[0].start;
            // A stable sort keeps repeated keys in the order written; the last one wins, as a
            // map insert would have it.
            members.sort_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
            let mut sorted = Vec::with_capacity(writer.out.len() - first);
            let mut index = 0;
            while index < members.len() {
                let mut last = index;
                while last + 1 < members.len() && members[last + 1].key == members[index].key {
                    last += 1;
                }
                if !sorted.is_empty() {
                    sorted.push(b',');
                }
                sorted.extend_from_slice(&writer.out[members[last].start..members[last].end]);
                index = last + 1;
            }
            writer.out.truncate(first);
            writer.out.extend_from_slice(&sorted);
        }
        writer.entries.truncate(base);
        writer.out.push(b'}');
        Ok(writer)
    }
}

/// An array being written.
struct Array<'a> {
    writer: &'a mut Writer,
    first: bool,
}

impl<'a> Array<'a> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.writer.out.push(b',');
        }
        self.first = false;
        value.serialize(&mut *self.writer)
    }

    fn close(self) -> Result<&'a mut Writer, Error> {
        self.writer.out.push(b']');
        Ok(self.writer)
    }
}

/// An enum variant with data, `{"variant": <data>}`: the data, an array or an object.
struct Variant<T>(T);

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Variant<Array<'a>>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Variant<Object<'a>>;

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        Ok(ser::Serializer::serialize_bool(&mut self.scalar(), value)?)
    }
    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }
    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }
    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(value))
    }
    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        Ok(ser::Serializer::serialize_i64(&mut self.scalar(), value)?)
    }
    fn serialize_i128(self, _: i128) -> Result<(), Error> {
        Err(Error::Tree)
    }
    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }
    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }
    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.serialize_u64(u64::from(value))
    }
    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        Ok(ser::Serializer::serialize_u64(&mut self.scalar(), value)?)
    }
    fn serialize_u128(self, _: u128) -> Result<(), Error> {
        Err(Error::Tree)
    }
    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        // A tree keeps every float as an f64.
        self.serialize_f64(f64::from(value))
    }
    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        // Not finite: `null` either way.
        Ok(ser::Serializer::serialize_f64(&mut self.scalar(), value)?)
    }
    fn serialize_char(self, value: char) -> Result<(), Error> {
        self.string(value.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, value: &str) -> Result<(), Error> {
        self.string(value)
    }
    fn serialize_bytes(self, value: &[u8]) -> Result<(), Error> {
        // A tree holds bytes as an array of numbers.
        let mut array = ser::Serializer::serialize_seq(self, Some(value.len()))?;
        for byte in value {
            ser::SerializeSeq::serialize_element(&mut array, byte)?;
        }
        ser::SerializeSeq::end(array)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let mut object = self.open_object();
        object.member(Cow::Borrowed(variant), value)?;
        object.close().map(drop)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, Error> {
        self.out.push(b'[');
        Ok(Array {
            writer: self,
            first: true,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Array<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Array<'a>>, Error> {
        self.out.push(b'{');
        self.string(variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Variant(Array {
            writer: self,
            first: true,
        }))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a>, Error> {
        Ok(self.open_object())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'a>, Error> {
        Ok(self.open_object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Variant<Object<'a>>, Error> {
        self.out.push(b'{');
        self.string(variant)?;
        self.out.push(b':');
        Ok(Variant(self.open_object()))
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeTupleVariant for Variant<Array<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.close()?.out.push(b'}');
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(Cow::Owned(key.serialize(KeyWriter)?));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("a map value without its key"))?;
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.member(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeStructVariant for Variant<Object<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.0.member(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.close()?.out.push(b'}');
        Ok(())
    }
}

/// What a map key becomes in a tree: a string, as serde_json's own key serializer makes it.
struct KeyWriter;

impl ser::Serializer for KeyWriter {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    fn serialize_str(self, value: &str) -> Result<String, Error> {
        Ok(value.to_owned())
    }
    fn serialize_char(self, value: char) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_bool(self, value: bool) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i8(self, value: i8) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i16(self, value: i16) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i32(self, value: i32) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_i64(self, value: i64) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u8(self, value: u8) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u16(self, value: u16) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u32(self, value: u32) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_u64(self, value: u64) -> Result<String, Error> {
        Ok(value.to_string())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    // Anything else (floats, 128-bit numbers, bytes, compound keys): the tree path decides.
    fn serialize_i128(self, _: i128) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_u128(self, _: u128) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_f32(self, _: f32) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_f64(self, _: f64) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Error> {
        Err(Error::Tree)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(Error::Tree)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(Error::Tree)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(Error::Tree)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error::Tree)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(Error::Tree)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(Error::Tree)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error::Tree)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::json;

    use super::*;

    /// What the tree path writes for `value`.
    fn through_tree<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        serde_json::to_vec(&serde_json::to_value(value).unwrap()).unwrap()
    }

    fn same<T: Serialize + ?Sized>(value: &T) {
        let mut writer = Writer {
            out: Vec::new(),
            entries: Vec::new(),
        };
        if let Err(Error::Tree) = value.serialize(&mut writer) {
            panic!("left to the tree path; this test is for the direct one");
        }
        let direct = to_vec(value).unwrap();
        let tree = through_tree(value);
        assert_eq!(
            String::from_utf8_lossy(&direct),
            String::from_utf8_lossy(&tree)
        );
    }

    #[derive(Serialize)]
    struct Inner {
        zeta: u8,
        alpha: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Unit,
        Newtype(Inner),
        Tuple(u8, String),
        Struct { b: i64, a: f32 },
    }

    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Tagged {
        Text {
            text: String,
            annotations: Option<u8>,
        },
        Image {
            data: String,
        },
    }

    #[derive(Serialize)]
    struct Outer {
        workspace: Inner,
        caller: Vec<Kind>,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
        numbers: BTreeMap<i32, bool>,
        tagged: Vec<Tagged>,
        bytes: &'static [u8],
        #[serde(with = "serde_bytes_like")]
        raw: Vec<u8>,
        float: f64,
        nan: f64,
        small: f32,
        character: char,
        unit: (),
        tuple: (u8, &'static str),
        keys: HashMap<String, u8>,
        escaped: BTreeMap<String, u8>,
        empty: BTreeMap<String, u8>,
        value: Value,
    }

    mod serde_bytes_like {
        pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(bytes)
        }
    }

    #[test]
    fn bytes_are_those_of_the_tree_path() {
        let outer = Outer {
            workspace: Inner {
                zeta: 1,
                alpha: Some("a \"quoted\" \u{7f} é\n".into()),
                skipped: None,
            },
            caller: vec![
                Kind::Unit,
                Kind::Newtype(Inner {
                    zeta: 2,
                    alpha: None,
                    skipped: Some(3),
                }),
                Kind::Tuple(4, "x".into()),
                Kind::Struct { b: -5, a: 0.1 },
            ],
            // `workspace` again, through the flattened map: the last one wins in a tree.
            extra: BTreeMap::from([
                ("workspace".to_owned(), json!("flattened")),
                ("middle".to_owned(), json!({"z": 1, "a": [1, 2.5, null]})),
            ]),
            numbers: BTreeMap::from([(9, true), (10, false), (-1, true)]),
            tagged: vec![
                Tagged::Text {
                    text: "hi".into(),
                    annotations: None,
                },
                Tagged::Image { data: "d".into() },
            ],
            bytes: b"ab",
            raw: vec![0, 255],
            float: 1e-7,
            nan: f64::NAN,
            small: 0.1,
            character: 'é',
            unit: (),
            tuple: (1, "two"),
            keys: (0..20).map(|n| (format!("k{n}"), n)).collect(),
            escaped: BTreeMap::from([
                ("a\"b".to_owned(), 1),
                ("a#".to_owned(), 2),
                ("A".to_owned(), 3),
                ("é".to_owned(), 4),
            ]),
            empty: BTreeMap::new(),
            value: json!({"b": {"d": [], "c": {}}, "a": "x"}),
        };
        same(&outer);
        same(&json!([]));
        same(&json!(null));
        same(&"just a string");
        same(&Kind::Unit);
        same(&Kind::Tuple(1, "t".into()));
    }

    #[test]
    fn shapes_left_to_the_tree_give_its_answer() {
        #[derive(Serialize)]
        struct Wide {
            z: u8,
            big: u128,
            a: u8,
        }
        let wide = Wide {
            z: 1,
            big: 12,
            a: 2,
        };
        assert_eq!(to_vec(&wide).unwrap(), through_tree(&wide));
        let float_keys = HashMap::from([(1, 1.5_f64)]);
        assert_eq!(to_vec(&float_keys).unwrap(), through_tree(&float_keys));
        assert_eq!(
            to_vec(&u128::from(u64::MAX)).unwrap(),
            through_tree(&u64::MAX)
        );
        assert!(to_vec(&u128::MAX).is_err());
        assert!(to_vec(&HashMap::from([((1, 2), 3)])).is_err());
    }

    #[test]
    fn unsorted_structs_and_repeated_keys_come_out_sorted() {
        #[derive(Serialize)]
        struct Fields {
            id: u8,
            name: u8,
            environment: u8,
            created_at: u8,
            #[serde(flatten)]
            again: BTreeMap<&'static str, u8>,
        }
        let fields = Fields {
            id: 1,
            name: 2,
            environment: 3,
            created_at: 4,
            again: BTreeMap::from([("id", 9), ("b", 5)]),
        };
        same(&fields);
        assert_eq!(
            to_vec(&fields).unwrap(),
            br#"{"b":5,"created_at":4,"environment":3,"id":9,"name":2}"#
        );
    }
}
