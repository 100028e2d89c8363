//! Whole RDB files: header, aux fields, functions, databases, EOF and
//! checksum.

use super::codec::Out;
use super::opcodes;

/// A function library: the FUNCTION2 opcode and the library's code.
pub(crate) fn put_function(out: &mut Out, code: &[u8]) {
    out.put_u8(opcodes::FUNCTION2);
    out.put_string(code);
}
