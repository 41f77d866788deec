#pragma once
// HDF5 C API plumbing for the archive: owning handles, checked calls, string attributes, and the
// record <-> compound-row mapping built from record_fields.hpp. Private to kstudy_archive.
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "detail/record_fields.hpp"

namespace kstudy::archive_detail {

// Owns one HDF5 id and closes it with the matching H5?close.
class h5_handle {
 public:
  using closer = herr_t (*)(hid_t);
  h5_handle() = default;
  h5_handle(hid_t id, closer close) : m_id(id), m_close(close) {}
  h5_handle(h5_handle&& other) noexcept : m_id(other.m_id), m_close(other.m_close) { other.m_id = H5I_INVALID_HID; }
  h5_handle& operator=(h5_handle&& other) noexcept {
    if (this != &other) {
      reset();
      m_id = other.m_id;
      m_close = other.m_close;
      other.m_id = H5I_INVALID_HID;
    }
    return *this;
  }
  h5_handle(const h5_handle&) = delete;
  h5_handle& operator=(const h5_handle&) = delete;
  ~h5_handle() { reset(); }

  hid_t get() const { return m_id; }
  explicit operator bool() const { return m_id >= 0; }
  void reset() {
    if (m_id >= 0 && m_close) m_close(m_id);  // errors on close are reported by close_checked
    m_id = H5I_INVALID_HID;
  }
  // Closes now and reports failure (a file close is where buffered data is written).
  void close_checked(const char* call, const std::string& path);

 private:
  hid_t m_id = H5I_INVALID_HID;
  closer m_close = nullptr;
};

// Turns off HDF5's automatic error-stack printing; our exceptions carry the message instead.
void silence_hdf5_errors();

// Whether the file starts an HDF5 superblock where the format puts one (byte 0, 512, 1024, 2048, ...),
// read with plain file I/O. H5Fis_hdf5 answers the same question by parsing the superblock inside this
// process, and HDF5 1.10 can corrupt its heap on a damaged one: every parse of an unverified file happens
// in verify_in_child's child instead.
bool has_hdf5_signature(const std::string& path);

// Throws std::runtime_error "kstudy: HDF5 <call> failed for archive '<path>': <innermost HDF5 message>".
[[noreturn]] void fail(const std::string& call, const std::string& path);
hid_t check_id(hid_t id, const std::string& call, const std::string& path);
void check(herr_t rc, const std::string& call, const std::string& path);
bool check_tri(htri_t rc, const std::string& call, const std::string& path);

h5_handle file_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle group_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle dataset_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle space_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle type_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle attribute_handle(hid_t id, const std::string& call, const std::string& path);
h5_handle plist_handle(hid_t id, const std::string& call, const std::string& path);

// Variable-length UTF-8 string type (h5py and pandas read these as Python strings/bytes, no custom code).
h5_handle vlen_string_type(const std::string& path);

bool link_exists(hid_t parent, const std::string& name, const std::string& path);
h5_handle open_group(hid_t parent, const std::string& name, const std::string& path);
h5_handle open_or_create_group(hid_t parent, const std::string& name, const std::string& path);

// Scalar variable-length UTF-8 string attributes; writing replaces an existing attribute of that name.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value, const std::string& path);
std::string read_string_attribute(hid_t object, const std::string& name, const std::string& path);
std::map<std::string, std::string> read_string_attributes(hid_t object, const std::string& path);
// Deletes every attribute of object except the one named keep (if any).
void delete_all_attributes(hid_t object, const std::string& path, const std::string& keep = "");

// Archive files are opened with the default (earliest) format bounds on purpose: the 1.10 "latest" superblock
// marks a file as open-for-write, and an archive left by a killed process would then refuse to open
// until someone ran h5clear. The earliest format holds everything the schema uses.
// Both throw kstudy::archive_in_use when another process holds the file open (HDF5's file lock).
h5_handle create_file(const std::string& path, bool truncate);
h5_handle open_file(const std::string& path, bool writable);

// --- record <-> compound row ---------------------------------------------------------------------------

// Memory layout of one record as a C row (natural alignment) and the packed little-endian file type.
struct compound_layout {
  std::size_t row_size = 0;
  std::vector<std::size_t> offsets;  // per field, in the memory row
  h5_handle memory_type;
  h5_handle file_type;
};

// With `stored` (the type of a dataset being read), a field the dataset lacks but holds under its former name is
// read from that column.
compound_layout make_layout(const record_schema& schema, const std::string& path, hid_t stored = -1);

// Fills rows; string fields point into the records (and to_string's static names), so the records must
// outlive the write.
std::vector<unsigned char> pack_rows(const record_batch& batch, const record_schema& schema,
                                     const compound_layout& layout);

template <class R>
std::vector<R> unpack_rows(const unsigned char* buffer, std::size_t count, const compound_layout& layout) {
  const auto& fields = record_table<R>::fields();
  std::vector<R> records(count);
  for (std::size_t r = 0; r < count; ++r) {
    const unsigned char* row = buffer + r * layout.row_size;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const unsigned char* src = row + layout.offsets[i];
      std::visit(
          [&](auto member) {
            auto& value = records[r].*member;
            using T = std::decay_t<decltype(value)>;
            if constexpr (std::is_same_v<T, std::string>) {
              const char* p = nullptr;
              std::memcpy(&p, src, sizeof p);
              value = p ? p : "";
            } else if constexpr (is_named_enum_v<T>) {
              // Null: the file's dataset has no such field (an older schema); the reader fills it in.
              const char* p = nullptr;
              std::memcpy(&p, src, sizeof p);
              if (p) value = named_enum<T>::parse(p);
            } else if constexpr (std::is_same_v<T, bool>) {
              std::uint8_t v = 0;
              std::memcpy(&v, src, sizeof v);
              value = v != 0;
            } else {
              std::memcpy(&value, src, sizeof value);
            }
          },
          fields[i].member);
    }
  }
  return records;
}

// Creates the record type's empty dataset in group: chunked, extendible, deflated where available, with its
// units attribute.
void create_row_dataset(hid_t group, const char* name, hid_t file_type, const char* units, const std::string& path);
void create_record_dataset(hid_t group, const record_schema& schema, const std::string& path);

// Extends the dataset by rows.size() and writes them at the end.
void append_row_buffer(hid_t group, const char* name, hid_t memory_type, const void* rows, std::size_t count,
                       const std::string& path);
// The batch's rows at the end of its type's dataset in group.
void append_records(hid_t group, const record_batch& batch, const std::string& path);

// Reads the whole dataset; variable-length strings are copied and HDF5's buffers reclaimed.
std::size_t read_row_buffer(hid_t group, const char* name, hid_t memory_type, std::vector<unsigned char>& rows,
                            std::size_t row_size, const std::string& path);
// The stored (file) type of a dataset.
h5_handle stored_type(hid_t group, const char* name, const std::string& path);
void reclaim_row_buffer(hid_t memory_type, std::vector<unsigned char>& rows, std::size_t count);

// The columns a stored dataset lacks (an older schema's) read as the record's own defaults ("not measured": NaN or
// -1; depth 1; empty text), as docs/archive_schema.md says they read, not as the zeros HDF5 leaves in a member the
// file does not have.
template <class R>
void read_absent_as_defaults(hid_t stored, std::vector<R>& records) {
  const R defaults{};
  for (const auto& f : record_table<R>::fields()) {
    if (H5Tget_member_index(stored, f.name) >= 0 ||
        (f.former_name != nullptr && H5Tget_member_index(stored, f.former_name) >= 0))
      continue;
    std::visit(
        [&](auto member) {
          for (auto& r : records) r.*member = defaults.*member;
        },
        f.member);
  }
}

template <class R>
std::vector<R> read_records(hid_t group, const std::string& path) {
  const h5_handle stored = stored_type(group, record_table<R>::dataset, path);
  const auto layout = make_layout(schema_of<R>(), path, stored.get());
  std::vector<unsigned char> rows;
  const std::size_t count =
      read_row_buffer(group, record_table<R>::dataset, layout.memory_type.get(), rows, layout.row_size, path);
  struct reclaim_guard {
    hid_t type;
    std::vector<unsigned char>& rows;
    std::size_t count;
    ~reclaim_guard() { reclaim_row_buffer(type, rows, count); }
  } guard{layout.memory_type.get(), rows, count};
  auto records = unpack_rows<R>(rows.data(), count, layout);
  read_absent_as_defaults(stored.get(), records);
  return records;
}

}  // namespace kstudy::archive_detail
