#pragma once
// Content checksums of an archive. HDF5 checks the integrity of very little in the file format the archive
// is written in (the earliest, see open_file): deflate's Adler-32 and Fletcher-32 cover the raw chunks, but
// not the variable-length strings in the global heap, the attributes (run metadata, definitions) or the
// names in the group heaps. A bit flipped in those reads back as a plausible wrong value. So every group
// and dataset carries a SHA-256 of what kstudy reads from it (its string attributes; a dataset's rows,
// column by column, strings by value), written when a writer closes the archive and checked by every
// reader: damage becomes an error naming the object, never a wrong table.
//
// Canonical stream per object (scripts/kstudy_py/archive.py computes the same):
//   "kstudy-digest-1\0"; every string attribute but the digest itself, sorted by name:
//     name "\0" u64le(length) value;
//   for a group: "links\0" and the names of its members, sorted, each followed by "\0";
//   for a dataset: "rows\0" u64le(rows); then per compound member in file order: name "\0" and per row
//     the member's little-endian file bytes, or for a variable-length string u64le(length) bytes.
// A writer removes the digests when it opens an archive and writes them all back at finish(): an
// archive left by a killed writer has none and is read unverified, as are archives written before them.
#include <hdf5.h>

#include <string>
#include <vector>

namespace kstudy::archive_detail {

inline constexpr const char* digest_attribute = "kstudy_sha256";

// SHA-256 of the object's canonical stream, lower-case hex.
std::string object_digest(hid_t object, bool is_dataset, const std::string& path);

// Every group and dataset under root (root included), depth first in name order: "/" , "/experiments", ...
struct archive_object {
  std::string name;
  bool is_dataset = false;
};
std::vector<archive_object> archive_objects(hid_t file, const std::string& path);

void remove_digests(hid_t file, const std::string& path);
void write_digests(hid_t file, const std::string& path);
// The objects whose stored digest differs from their content (objects without a digest are not checked).
std::vector<std::string> damaged_objects(hid_t file, const std::string& path);

}  // namespace kstudy::archive_detail
