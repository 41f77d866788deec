#include "hdf5_global_heap.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace kstudy::archive_detail {

namespace {

// Little-endian unsigned integer of `width` bytes at `at`; bytes past the end of the file read as zero,
// as HDF5's sec2 driver returns them.
std::uint64_t read_le(const std::vector<char>& bytes, std::uint64_t at, unsigned width) {
  std::uint64_t value = 0;
  for (unsigned i = 0; i < width; ++i) {
    const std::uint64_t position = at + i;
    const std::uint64_t byte =
        position < bytes.size() ? static_cast<unsigned char>(bytes[static_cast<std::size_t>(position)]) : 0;
    if (i < 8) value |= byte << (8 * i);
  }
  return value;
}

// The widths of the file's addresses and lengths ("size of offsets", "size of lengths" in the superblock);
// zeros when no superblock is found where the format puts one (offset 0, 512, 1024, ...: after a user block).
struct widths {
  unsigned address = 0, length = 0;
};
widths field_widths(const std::vector<char>& bytes) {
  static const char signature[] = "\x89HDF\r\n\x1a\n";
  const auto valid = [](unsigned width) { return width == 2 || width == 4 || width == 8 ? width : 0u; };
  for (std::uint64_t at = 0; at + 16 <= bytes.size(); at = at ? at * 2 : 512) {
    if (std::memcmp(bytes.data() + at, signature, 8) != 0) continue;
    const unsigned version = static_cast<unsigned char>(bytes[at + 8]);
    const std::uint64_t first = at + (version <= 1 ? 13 : 9);
    return {valid(static_cast<unsigned char>(bytes[first])), valid(static_cast<unsigned char>(bytes[first + 1]))};
  }
  return {};
}

std::string at_byte(std::uint64_t at) { return "global heap collection at byte " + std::to_string(at); }

// What a collection holds, as HDF5 decodes it: each object's index and stored length.
struct collection {
  std::map<std::uint64_t, std::uint64_t> objects;  // index -> length
  bool cut = false;                                // the file ends inside it: its objects past the end are unknown
};

// One collection, walked as HDF5 1.10 decodes it (H5HG__cache_heap_deserialize): a header, then objects of
// (index, reference count, reserved, length, data padded to 8 bytes) up to the collection's end; a tail too
// short for an object header is free space. Index 0 is the free-space object, whose length covers itself.
std::string check_collection(const std::vector<char>& bytes, std::uint64_t start, unsigned width, collection& found) {
  const std::uint64_t header = 4 + 1 + 3 + width;
  const std::uint64_t object_header = 2 + 2 + 4 + width;
  const std::uint64_t size = read_le(bytes, start + 8, width);
  // HDF5 never writes a collection under 4096 bytes (H5HG_MINSIZE), and reads one as 4096 bytes first.
  if (size < 4096) return at_byte(start) + " claims " + std::to_string(size) + " bytes, under HDF5's least 4096";
  // A file cut inside the collection (a run killed while writing) is read no further than its end: HDF5 refuses
  // a cut file when it opens it, and `kstudy salvage` pads it with zeros, which this check must not call damage.
  found.cut = size > bytes.size() - start;
  // HDF5 reads the collection from the file in one piece: one reaching past any address this file can
  // have is refused by HDF5 itself; the check stops at the file's end plus one collection's worth of zeros.
  if (size > bytes.size() - start + (std::uint64_t{1} << 20)) return {};
  const std::uint64_t end = start + size;
  for (std::uint64_t p = start + header; p < end;) {
    if (p + object_header > end) break;  // free space
    if (p + object_header > bytes.size()) break;
    const std::uint64_t index = read_le(bytes, p, 2);
    const std::uint64_t length = read_le(bytes, p + 8, width);
    const std::uint64_t need = index > 0 ? object_header + ((length + 7) / 8) * 8 : length;
    if (length > size || need > end - p)
      return at_byte(start) + " has object " + std::to_string(index) + " of " + std::to_string(length) +
             " bytes, past the collection's end";
    if (need == 0) return at_byte(start) + " has an empty free-space object";  // HDF5 would loop on it
    if (index > 0) found.objects[index] = length;
    p += need;
  }
  return {};
}

// One stored variable-length string (sequence length, collection address, object index) checked as HDF5
// would follow it: H5HG_read indexes the collection's object table by the stored index without checking it
// (past the table when no such object exists) and copies the object's whole stored length into a buffer
// sized by the sequence length. Empty when it is safe to follow, or points at no collection (HDF5 then
// refuses the address itself: it checks the signature there).
std::string check_reference(const std::vector<char>& bytes, std::uint64_t at, unsigned address_width,
                            const std::map<std::uint64_t, collection>& collections) {
  const std::uint64_t length = read_le(bytes, at, 4), address = read_le(bytes, at + 4, address_width);
  const std::uint64_t index = read_le(bytes, at + 4 + address_width, 4);
  const auto heap = collections.find(address);
  // HDF5 reads nothing for an empty sequence; what a cut collection held past the file's end is not known.
  if (length == 0 || heap == collections.end() || heap->second.cut) return {};
  const std::string where = "string at byte " + std::to_string(at) + " refers to object " + std::to_string(index) +
                            " of the " + at_byte(address);
  const auto object = heap->second.objects.find(index);
  if (object == heap->second.objects.end()) return where + ", which holds no such object";
  if (object->second > length)
    return where + ", whose " + std::to_string(object->second) + " bytes overflow its " + std::to_string(length);
  return {};
}

// Every attribute message holding variable-length strings, found by its layout (HDF5's attribute message,
// versions 1-3: version, flags, the sizes of name, datatype and dataspace, then each of them, padded to 8
// bytes in version 1, then the data), and each string in it checked. kstudy's strings are attributes: its
// datasets' chunks are compressed and checksummed, so a damaged reference there fails to decompress first.
std::string check_attribute_strings(const std::vector<char>& bytes, widths width,
                                    const std::map<std::uint64_t, collection>& collections) {
  const auto padded = [](std::uint64_t n, unsigned version) { return version == 1 ? (n + 7) / 8 * 8 : n; };
  const std::uint64_t reference = 4 + width.address + 4;  // a variable-length string's size on disk
  for (std::uint64_t at = 0; at + 16 <= bytes.size(); ++at) {
    const unsigned version = static_cast<unsigned char>(bytes[at]);
    if (version < 1 || version > 3 || (version == 1 && bytes[at + 1] != 0)) continue;
    const std::uint64_t name_size = read_le(bytes, at + 2, 2), type_size = read_le(bytes, at + 4, 2);
    const std::uint64_t space_size = read_le(bytes, at + 6, 2);
    if (name_size == 0 || type_size < 8 || space_size < 8) continue;
    const std::uint64_t name = at + 8 + (version == 3 ? 1 : 0), type = name + padded(name_size, version);
    const std::uint64_t space = type + padded(type_size, version), data = space + padded(space_size, version);
    if (data > bytes.size() || bytes[name + name_size - 1] != 0) continue;  // names end in a NUL
    // A variable-length (class 9, datatype versions 1-3) string (type 1 in the class bits) of the reference's size.
    const unsigned type_byte = static_cast<unsigned char>(bytes[type]);
    if ((type_byte & 0x0F) != 9 || (type_byte >> 4) < 1 || (type_byte >> 4) > 3 || (bytes[type + 1] & 0x0F) != 1 ||
        read_le(bytes, type + 4, 4) != reference)
      continue;
    // The dataspace (versions 1 and 2): its rank's extents give the number of strings; scalar is one.
    const unsigned space_version = static_cast<unsigned char>(bytes[space]);
    const unsigned rank = static_cast<unsigned char>(bytes[space + 1]);
    if ((space_version != 1 && space_version != 2) || rank > 32) continue;
    if (space_version == 2 && bytes[space + 3] == 2) continue;  // the null dataspace holds nothing
    std::uint64_t count = 1;
    const std::uint64_t extents = space + (space_version == 1 ? 8 : 4);
    for (unsigned i = 0; i < rank && count <= bytes.size(); ++i)
      count *= read_le(bytes, extents + i * width.length, width.length);
    if (count > (bytes.size() - data) / reference) continue;  // not an attribute message after all
    for (std::uint64_t i = 0; i < count; ++i)
      if (auto problem = check_reference(bytes, data + i * reference, width.address, collections); !problem.empty())
        return problem;
  }
  return {};
}

}  // namespace

std::string damaged_global_heap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};  // HDF5 will name the problem
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const widths width = field_widths(bytes);
  if (width.address == 0 || width.length == 0) return {};
  // Every place HDF5 could take for a collection: it checks only the signature and version at the address a
  // heap identifier names, so every "GCOL" followed by version 1 is checked, wherever it lies.
  static const char magic[] = "GCOL";
  std::map<std::uint64_t, collection> collections;
  for (std::size_t at = 0; at + 5 <= bytes.size(); ++at) {
    const void* found = std::memchr(bytes.data() + at, 'G', bytes.size() - at);
    if (!found) break;
    at = static_cast<std::size_t>(static_cast<const char*>(found) - bytes.data());
    if (at + 5 > bytes.size() || std::memcmp(bytes.data() + at, magic, 4) != 0 || bytes[at + 4] != 1) continue;
    if (auto problem = check_collection(bytes, at, width.length, collections[at]); !problem.empty()) return problem;
  }
  return check_attribute_strings(bytes, width, collections);
}

}  // namespace kstudy::archive_detail
