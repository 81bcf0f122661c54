//! Stream events parsed into borrowing structs: the per-event path, with `Value` kept for
//! the events that need it.
//!
//! A typed parse takes only the shape a server normally sends. Any surprise (a field of
//! another type, an array where an object belongs, a duplicate key, invalid JSON) fails it,
//! and the event is parsed as a `Value` by the code the folds used before, so every such
//! event reads as it always did. The one difference: fields the typed parse skips are
//! checked for JSON syntax only, so a skipped string with a lone surrogate escape, a skipped
//! number beyond `f64` or skipped nesting deeper than 128, all of which `Value` refuses, no
//! longer fail the event.

use super::sse::ItemRef;
use super::{RequestError, value_event};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// What one item of a generation stream holds.
pub(crate) enum Event<T> {
    /// A keep-alive comment: nothing to fold.
    Skip,
    /// `data: [DONE]`.
    Done,
    /// The event in its usual shape.
    Typed(T),
    /// The event as a `Value`: it needs more than `T` holds, or is not in `T`'s shape.
    Value(Value),
}

/// An event's typed form, which says when the event needs its `Value` after all.
pub(crate) trait TypedEvent<'a>: Deserialize<'a> {
    /// An error event, or one holding what only the `Value` path reads (a final event's
    /// reason, timings, spec counts).
    fn needs_value(&self) -> bool;
}

/// Parse an item as `T` where it can be, else as a `Value` (with `event_json`'s errors:
/// malformed data, in-stream error events).
pub(crate) fn event_typed<'a, T: TypedEvent<'a>>(
    item: ItemRef<'a>,
) -> Result<Event<T>, RequestError> {
    let ItemRef::Event(ev) = item else {
        return Ok(Event::Skip);
    };
    if ev.data.trim() == "[DONE]" {
        return Ok(Event::Done);
    }
    match serde_json::from_str::<Obj<T>>(ev.data) {
        Ok(Obj(t)) if !t.needs_value() => Ok(Event::Typed(t)),
        _ => value_event(ev).map(Event::Value),
    }
}

/// `T` from a JSON object only. Derived structs also take an array, field by field, where
/// `Value::get` finds nothing.
pub(crate) struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A JSON string, borrowed from the event unless it has escapes. (`Option<Cow<str>>`
/// always copies, even with `#[serde(borrow)]`.)
#[derive(Debug, PartialEq)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a str>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// The text of an optional string field, `""` when absent or null.
pub(crate) fn text<'s>(s: &'s Option<Str<'_>>) -> &'s str {
    s.as_ref().map_or("", |s| &s.0)
}

/// A field as `Value::get` tells it: absent, null, or a value (`Option<Option<T>>` reads
/// null as absent). Use with `#[serde(default)]`.
#[derive(Debug, Default, PartialEq)]
pub(crate) enum Field<T> {
    #[default]
    Absent,
    Null,
    Is(T),
}

impl<T> Field<T> {
    pub(crate) fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }

    pub(crate) fn value(&self) -> Option<&T> {
        match self {
            Field::Is(t) => Some(t),
            Field::Absent | Field::Null => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            Some(t) => Field::Is(t),
            None => Field::Null,
        })
    }
}

/// The length of a JSON array, its elements skipped.
#[derive(Debug, PartialEq)]
pub(crate) struct SeqLen(pub usize);

impl<'de> Deserialize<'de> for SeqLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SeqLen;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SeqLen, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(SeqLen(n))
            }
        }
        d.deserialize_seq(V)
    }
}

/// The first element of a JSON array (`None` when empty), the rest skipped.
#[derive(Debug, PartialEq)]
pub(crate) struct First<T>(pub Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct T<'a> {
        #[serde(borrow)]
        s: Option<Str<'a>>,
        #[serde(default)]
        f: Field<u64>,
        n: Option<SeqLen>,
        #[serde(borrow)]
        first: Option<First<Obj<Inner<'a>>>>,
        error: Option<IgnoredAny>,
    }

    #[derive(Deserialize)]
    struct Inner<'a> {
        #[serde(borrow)]
        s: Option<Str<'a>>,
    }

    impl<'a> TypedEvent<'a> for T<'a> {
        fn needs_value(&self) -> bool {
            self.error.is_some()
        }
    }

    fn typed(data: &str) -> Result<Event<T<'_>>, RequestError> {
        event_typed(ev(data))
    }

    fn the_typed(data: &str) -> T<'_> {
        match typed(data) {
            Ok(Event::Typed(t)) => t,
            _ => panic!("not typed: {data}"),
        }
    }

    fn is_value(data: &str) -> bool {
        matches!(typed(data), Ok(Event::Value(_)))
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let t = the_typed(r#"{"s":"h\u00e9llo w\u00f6rld"}"#);
        assert_eq!(t.s, Some(Str(Cow::Owned("héllo wörld".into()))));
        let t = the_typed(r#"{"s":"héllo 😀"}"#);
        assert!(matches!(t.s, Some(Str(Cow::Borrowed("héllo 😀")))));
        let t = the_typed(r#"{"s":"a\"b\nc\\"}"#);
        assert!(matches!(&t.s, Some(Str(Cow::Owned(s))) if s == "a\"b\nc\\"));
        assert_eq!(text(&the_typed(r#"{"s":null}"#).s), "");
        assert_eq!(text(&the_typed("{}").s), "");
        // A surrogate pair is one character.
        assert_eq!(text(&the_typed(r#"{"s":"\ud83d\ude00"}"#).s), "😀");
    }

    #[test]
    fn fields_tell_absent_from_null() {
        assert_eq!(the_typed("{}").f, Field::Absent);
        assert_eq!(the_typed(r#"{"f":null}"#).f, Field::Null);
        assert_eq!(the_typed(r#"{"f":3}"#).f, Field::Is(3));
        assert!(the_typed(r#"{"f":null}"#).f.value().is_none());
        assert!(!the_typed(r#"{"f":null}"#).f.is_absent());
    }

    #[test]
    fn arrays_count_and_give_their_first_object() {
        let t = the_typed(r#"{"n":[1,[2,3],{"a":4}],"first":[{"s":"x"},{"s":1},7]}"#);
        assert_eq!(t.n, Some(SeqLen(3)));
        let first = t.first.unwrap().0.unwrap().0;
        assert_eq!(text(&first.s), "x");
        let t = the_typed(r#"{"n":[],"first":[]}"#);
        assert_eq!(t.n, Some(SeqLen(0)));
        assert!(t.first.unwrap().0.is_none());
    }

    #[test]
    fn other_shapes_take_the_value_path() {
        for data in [
            r#"{"s":5}"#,
            r#"{"f":-1}"#,
            r#"{"f":1.0}"#,
            r#"{"n":{}}"#,
            r#"{"first":[null]}"#,
            r#"{"first":[[]]}"#,
            r#"{"first":{"0":{}}}"#,
            r#"{"s":"a","s":"b"}"#,
            r#"["s"]"#,
            "3",
        ] {
            assert!(is_value(data), "{data}");
        }
        // Unknown fields are skipped, checked for syntax only (see the module's note).
        assert_eq!(text(&the_typed(r#"{"x":[{"y":null}],"s":"k"}"#).s), "k");
        assert_eq!(text(&the_typed(r#"{"x":"\ud800","s":"k"}"#).s), "k");
        assert!(serde_json::from_str::<Value>(r#"{"x":"\ud800","s":"k"}"#).is_err());
    }

    #[test]
    fn errors_done_and_malformed_data_read_as_before() {
        assert!(matches!(typed("[DONE]"), Ok(Event::Done)));
        assert!(matches!(typed(" [DONE] "), Ok(Event::Done)));
        assert!(matches!(
            event_typed::<T<'_>>(ItemRef::Comment),
            Ok(Event::Skip)
        ));
        assert!(matches!(
            typed(r#"{"error":null,"s":"a"}"#),
            Ok(Event::Typed(_))
        ));
        assert_eq!(
            typed(r#"{"error":{"message":"boom"}}"#).err(),
            Some(RequestError::ServerEvent("boom".into()))
        );
        assert_eq!(
            typed(r#"{"error":"plain"}"#).err(),
            Some(RequestError::ServerEvent("plain".into()))
        );
        let bad = typed(r#"{"s":"a""#).err().unwrap();
        let want = super::super::event_json(ev(r#"{"s":"a""#)).err().unwrap();
        assert_eq!(bad, want);
        assert!(matches!(bad, RequestError::Malformed { offset: 0, .. }));
    }
}
