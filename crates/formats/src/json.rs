//! JSON helpers for untrusted files: objects whose duplicate keys are an error rather than
//! silently overwritten (serde_json's maps keep the last one).
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A JSON object kept in file order, refusing duplicate keys.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UniqueMap<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UniqueMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = UniqueMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, V)> = Vec::new();
                let mut seen = std::collections::HashSet::new();
                while let Some((key, value)) = access.next_entry::<String, V>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "key \"{key}\" appears more than once"
                        )));
                    }
                    entries.push((key, value));
                }
                Ok(UniqueMap(entries))
            }
        }
        deserializer.deserialize_map(MapVisitor(std::marker::PhantomData))
    }
}
