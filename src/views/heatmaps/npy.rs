//! NumPy files: `.npy` (format 1.0) for one array, and `.npz` (an uncompressed zip of `.npy` files) for
//! a head's probabilities with its query and key tokens alongside. `numpy.load` reads both.

/// The `.npy` bytes of a little-endian f32 array of `shape` (C order).
pub fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let mut out = header("<f4", shape);
    out.reserve(data.len() * 4);
    for x in data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The `.npy` bytes of a 1-D array of Unicode strings (`<U{width}`: UTF-32LE, zero-padded).
pub fn npy_unicode(strings: &[String]) -> Vec<u8> {
    let width = strings.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
    let mut out = header(&format!("<U{width}"), &[strings.len()]);
    for s in strings {
        let mut count = 0;
        for c in s.chars() {
            out.extend_from_slice(&(c as u32).to_le_bytes());
            count += 1;
        }
        out.extend(std::iter::repeat_n(0u8, (width - count) * 4));
    }
    out
}

/// Magic, version 1.0, header length, and the header dict padded with spaces to a multiple of 64 bytes
/// (newline last).
fn header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// CRC-32 (IEEE, as zip uses it).
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// An uncompressed zip holding `files` (name, bytes): what `numpy.savez` writes.
pub fn zip_stored(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let size = data.len() as u32;
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&20u16.to_le_bytes()); // version needed
            v.extend_from_slice(&0u16.to_le_bytes()); // flags
            v.extend_from_slice(&0u16.to_le_bytes()); // stored
            v.extend_from_slice(&0u16.to_le_bytes()); // time
            v.extend_from_slice(&0x21u16.to_le_bytes()); // date: 1980-01-01
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&size.to_le_bytes());
            v.extend_from_slice(&size.to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // extra length
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // version made by
        common(&mut central);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment length
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let central_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // disk numbers
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A head's `.npz`: `probabilities` `[rows, cols]`, `query_tokens` `[rows]`, `key_tokens` `[cols]`.
pub fn head_npz(rows: usize, cols: usize, probs: &[f32], query_tokens: &[String], key_tokens: &[String]) -> Vec<u8> {
    zip_stored(&[
        ("probabilities.npy", npy_f32(&[rows, cols], probs)),
        ("query_tokens.npy", npy_unicode(query_tokens)),
        ("key_tokens.npy", npy_unicode(key_tokens)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_by_hand() {
        let bytes = npy_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with(" \n"));
        assert_eq!(bytes.len(), 10 + header_len + 24);
        assert_eq!(&bytes[10 + header_len..][..4], &1.0f32.to_le_bytes());
        let strings = npy_unicode(&["ab".into(), "é".into()]);
        let h = u16::from_le_bytes([strings[8], strings[9]]) as usize;
        assert!(std::str::from_utf8(&strings[10..10 + h]).unwrap().contains("'descr': '<U2'"));
        assert!(std::str::from_utf8(&strings[10..10 + h]).unwrap().contains("'shape': (2,)"));
        assert_eq!(&strings[10 + h..], &[b'a', 0, 0, 0, b'b', 0, 0, 0, 0xE9, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn crc_and_zip_by_hand() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let z = zip_stored(&[("a.txt", b"hi".to_vec())]);
        // local header (30) + name (5) + data (2) + central (46 + 5) + end (22)
        assert_eq!(z.len(), 30 + 5 + 2 + 46 + 5 + 22);
        assert_eq!(&z[..4], &[0x50, 0x4b, 0x03, 0x04]);
        assert_eq!(&z[30..35], b"a.txt");
        assert_eq!(&z[35..37], b"hi");
        assert_eq!(&z[z.len() - 22..][..4], &[0x50, 0x4b, 0x05, 0x06]);
    }
}
