//! [`SmallBytes`]: a byte string of 24 bytes, inline when short. Sorted-set
//! members, set members and the fields and values of large hashes are
//! mostly short (ids, tokens, counters), and keeping them inside their table
//! slot saves an allocation and a pointer chase each.

/// Byte strings up to this long are stored inline.
pub(crate) const INLINE: usize = 22;

/// A byte string, inline when short (24 bytes either way).
#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SmallBytes {
    pub fn new(b: &[u8]) -> SmallBytes {
        if b.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..b.len()].copy_from_slice(b);
            SmallBytes::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            SmallBytes::Heap(b.into())
        }
    }

    pub const EMPTY: SmallBytes = SmallBytes::Inline {
        len: 0,
        bytes: [0; INLINE],
    };

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, bytes } => &bytes[..*len as usize],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

const _: () = assert!(std::mem::size_of::<SmallBytes>() == 24);
