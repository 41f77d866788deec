#include "detail/hdf5_util.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <variant>

#include "kstudy/runner/archive.hpp"

namespace kstudy::archive_detail {

namespace {

// Collects the innermost HDF5 error description: it names the cause (e.g. "unable to open file: name =
// ..., errno = 13"), while the outer entries only repeat which API call failed.
herr_t collect_innermost(unsigned, const H5E_error2_t* error, void* out) {
  if (error && error->desc && *error->desc) *static_cast<std::string*>(out) = error->desc;
  return 0;
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

std::vector<std::string> attribute_names(hid_t object, const std::string& path);

herr_t find_lock_failure(unsigned, const H5E_error2_t* error, void* out) {
  if (error && error->min_num == H5E_CANTLOCKFILE) *static_cast<bool*>(out) = true;
  return 0;
}

// Whether the last HDF5 call failed taking its file lock (the error stack is left for fail()).
bool lock_refused() {
  bool refused = false;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_lock_failure, &refused);
  return refused;
}

// HDF5 1.10 (built with flock, as Debian's is) holds flock on an open file for as long as it is open:
// shared to read, exclusive to write, and refuses to open a file whose lock it cannot take. The same
// probe here tells a file held by another process from other open failures, and guards H5Fcreate's
// truncation, which 1.10.8 does before it takes the lock (checked: a file held by an h5py writer was
// left empty). A probe that cannot run says "not held" and HDF5's own error stands.
bool held_elsewhere(const std::string& path, bool exclusive) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the probe's lock if it took one; nothing was written through fd
  return held;
}

[[noreturn]] void throw_in_use(const std::string& path) {
  H5Eclear2(H5E_DEFAULT);
  throw archive_in_use("archive '" + path + "' is open in another process (a kstudy run still writing it?)");
}

}  // namespace

void h5_handle::close_checked(const char* call, const std::string& path) {
  if (m_id < 0) return;
  const hid_t id = m_id;
  m_id = H5I_INVALID_HID;
  if (m_close) check(m_close(id), call, path);
}

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

bool has_hdf5_signature(const std::string& path) {
  static constexpr unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  for (std::uint64_t at = 0; at + sizeof signature <= size; at = at == 0 ? 512 : at * 2) {
    unsigned char bytes[sizeof signature] = {};
    in.seekg(static_cast<std::streamoff>(at));
    if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes)) return false;
    if (std::memcmp(bytes, signature, sizeof signature) == 0) return true;
  }
  return false;
}

void fail(const std::string& call, const std::string& path) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw std::runtime_error("kstudy: HDF5 " + call + " failed for archive '" + path + "'" +
                           (detail.empty() ? std::string() : ": " + detail));
}

hid_t check_id(hid_t id, const std::string& call, const std::string& path) {
  if (id < 0) fail(call, path);
  return id;
}

void check(herr_t rc, const std::string& call, const std::string& path) {
  if (rc < 0) fail(call, path);
}

bool check_tri(htri_t rc, const std::string& call, const std::string& path) {
  if (rc < 0) fail(call, path);
  return rc > 0;
}

h5_handle file_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Fclose};
}
h5_handle group_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Gclose};
}
h5_handle dataset_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Dclose};
}
h5_handle space_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Sclose};
}
h5_handle type_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Tclose};
}
h5_handle attribute_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Aclose};
}
h5_handle plist_handle(hid_t id, const std::string& call, const std::string& path) {
  return {check_id(id, call, path), H5Pclose};
}

h5_handle vlen_string_type(const std::string& path) {
  h5_handle type = type_handle(H5Tcopy(H5T_C_S1), "H5Tcopy(H5T_C_S1)", path);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size(H5T_VARIABLE)", path);
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset(UTF-8)", path);
  return type;
}

bool link_exists(hid_t parent, const std::string& name, const std::string& path) {
  return check_tri(H5Lexists(parent, name.c_str(), H5P_DEFAULT), "H5Lexists(" + name + ")", path);
}

h5_handle open_group(hid_t parent, const std::string& name, const std::string& path) {
  return group_handle(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), "H5Gopen2(" + name + ")", path);
}

h5_handle open_or_create_group(hid_t parent, const std::string& name, const std::string& path) {
  if (link_exists(parent, name, path)) return open_group(parent, name, path);
  return group_handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      "H5Gcreate2(" + name + ")", path);
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value, const std::string& path) {
  const std::string what = "(attribute " + name + ")";
  if (check_tri(H5Aexists(object, name.c_str()), "H5Aexists" + what, path))
    check(H5Adelete(object, name.c_str()), "H5Adelete" + what, path);
  h5_handle type = vlen_string_type(path);
  h5_handle space = space_handle(H5Screate(H5S_SCALAR), "H5Screate" + what, path);
  h5_handle attribute = attribute_handle(
      H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2" + what, path);
  const char* data = value.c_str();
  check(H5Awrite(attribute.get(), type.get(), &data), "H5Awrite" + what, path);
}

std::string read_string_attribute(hid_t object, const std::string& name, const std::string& path) {
  const std::string what = "(attribute " + name + ")";
  h5_handle attribute = attribute_handle(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen" + what, path);
  h5_handle file_type = type_handle(H5Aget_type(attribute.get()), "H5Aget_type" + what, path);
  if (H5Tget_class(file_type.get()) != H5T_STRING)
    throw std::runtime_error("kstudy: attribute '" + name + "' of archive '" + path + "' is not a string");
  const H5T_cset_t cset = H5Tget_cset(file_type.get());
  if (check_tri(H5Tis_variable_str(file_type.get()), "H5Tis_variable_str" + what, path)) {
    h5_handle memory_type = vlen_string_type(path);
    check(H5Tset_cset(memory_type.get(), cset), "H5Tset_cset" + what, path);
    char* data = nullptr;
    check(H5Aread(attribute.get(), memory_type.get(), &data), "H5Aread" + what, path);
    std::string value = data ? data : "";
    H5free_memory(data);
    return value;
  }
  // Fixed-length strings (written by other tools): read with one spare byte for the terminator.
  const std::size_t size = H5Tget_size(file_type.get());
  h5_handle memory_type = type_handle(H5Tcopy(H5T_C_S1), "H5Tcopy" + what, path);
  check(H5Tset_size(memory_type.get(), size + 1), "H5Tset_size" + what, path);
  check(H5Tset_cset(memory_type.get(), cset), "H5Tset_cset" + what, path);
  std::vector<char> data(size + 1, '\0');
  check(H5Aread(attribute.get(), memory_type.get(), data.data()), "H5Aread" + what, path);
  return std::string(data.data());
}

namespace {
std::vector<std::string> attribute_names(hid_t object, const std::string& path) {
  std::vector<std::string> names;
  hsize_t index = 0;
  check(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute_name, &names), "H5Aiterate2", path);
  return names;
}
}  // namespace

std::map<std::string, std::string> read_string_attributes(hid_t object, const std::string& path) {
  std::map<std::string, std::string> values;
  for (const auto& name : attribute_names(object, path)) {
    h5_handle attribute = attribute_handle(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen(" + name + ")", path);
    h5_handle type = type_handle(H5Aget_type(attribute.get()), "H5Aget_type(" + name + ")", path);
    if (H5Tget_class(type.get()) != H5T_STRING) continue;  // not ours: the schema only writes strings here
    values[name] = read_string_attribute(object, name, path);
  }
  return values;
}

void delete_all_attributes(hid_t object, const std::string& path, const std::string& keep) {
  for (const auto& name : attribute_names(object, path))
    if (name != keep) check(H5Adelete(object, name.c_str()), "H5Adelete(" + name + ")", path);
}

h5_handle create_file(const std::string& path, bool truncate) {
  std::error_code ec;
  if (truncate && std::filesystem::exists(path, ec) && held_elsewhere(path, true)) throw_in_use(path);
  const hid_t id = H5Fcreate(path.c_str(), truncate ? H5F_ACC_TRUNC : H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0 && lock_refused() && held_elsewhere(path, true)) throw_in_use(path);
  return file_handle(id, "H5Fcreate", path);
}

h5_handle open_file(const std::string& path, bool writable) {
  const hid_t id = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0 && lock_refused() && held_elsewhere(path, writable)) throw_in_use(path);
  return file_handle(id, "H5Fopen", path);
}

void create_row_dataset(hid_t group, const char* name, hid_t file_type, const char* units, const std::string& path) {
  const std::string what = std::string("(") + name + ")";
  const hsize_t initial = 0, maximum = H5S_UNLIMITED, chunk = 1024;
  h5_handle space = space_handle(H5Screate_simple(1, &initial, &maximum), "H5Screate_simple" + what, path);
  h5_handle dcpl = plist_handle(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate" + what, path);
  check(H5Pset_chunk(dcpl.get(), 1, &chunk), "H5Pset_chunk" + what, path);
  // Compress only where this HDF5 can both encode and decode deflate; otherwise store plain chunks.
  if (check_tri(H5Zfilter_avail(H5Z_FILTER_DEFLATE), "H5Zfilter_avail(deflate)", path)) {
    unsigned int config = 0;
    check(H5Zget_filter_info(H5Z_FILTER_DEFLATE, &config), "H5Zget_filter_info(deflate)", path);
    if ((config & H5Z_FILTER_CONFIG_ENCODE_ENABLED) && (config & H5Z_FILTER_CONFIG_DECODE_ENABLED))
      check(H5Pset_deflate(dcpl.get(), 4), "H5Pset_deflate" + what, path);
  }
  // A checksum per stored chunk, so that a chunk damaged on disk fails to read (deflate's own Adler-32 is
  // absent where deflate is): four bytes a chunk, and archives written without it read as before.
  check(H5Pset_fletcher32(dcpl.get()), "H5Pset_fletcher32" + what, path);
  h5_handle dataset = dataset_handle(
      H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), "H5Dcreate2" + what, path);
  write_string_attribute(dataset.get(), "units", units, path);
}

void append_row_buffer(hid_t group, const char* name, hid_t memory_type, const void* rows, std::size_t count,
                       const std::string& path) {
  if (count == 0) return;
  const std::string what = std::string("(") + name + ")";
  h5_handle dataset = dataset_handle(H5Dopen2(group, name, H5P_DEFAULT), "H5Dopen2" + what, path);
  hsize_t existing = 0;
  {
    h5_handle space = space_handle(H5Dget_space(dataset.get()), "H5Dget_space" + what, path);
    if (H5Sget_simple_extent_dims(space.get(), &existing, nullptr) != 1) fail("H5Sget_simple_extent_dims" + what, path);
  }
  const hsize_t added = count, extent = existing + added;
  check(H5Dset_extent(dataset.get(), &extent), "H5Dset_extent" + what, path);
  h5_handle file_space = space_handle(H5Dget_space(dataset.get()), "H5Dget_space" + what, path);
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &existing, nullptr, &added, nullptr),
        "H5Sselect_hyperslab" + what, path);
  h5_handle memory_space = space_handle(H5Screate_simple(1, &added, nullptr), "H5Screate_simple" + what, path);
  check(H5Dwrite(dataset.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, rows),
        "H5Dwrite" + what, path);
}

namespace {

// The compound member of one field: its size (also its alignment), its memory type and its file type.
struct member_type {
  std::size_t size;
  hid_t memory, file;
};

member_type member_of(field_type type, hid_t string_type) {
  // Not a braced list of the H5T_* macros (each a comma expression): nvcc's front end misreads that.
  const auto member = [](std::size_t size, hid_t memory, hid_t file) { return member_type{size, memory, file}; };
  switch (type) {
    case field_type::text:
    case field_type::named_enum:
      return member(sizeof(char*), string_type, string_type);
    case field_type::int64:
      return member(sizeof(std::int64_t), H5T_NATIVE_INT64, H5T_STD_I64LE);
    case field_type::int32:
      return member(sizeof(std::int32_t), H5T_NATIVE_INT32, H5T_STD_I32LE);
    case field_type::real:
      return member(sizeof(double), H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
    case field_type::boolean:
      return member(sizeof(std::uint8_t), H5T_NATIVE_UINT8, H5T_STD_U8LE);
  }
  throw std::logic_error("kstudy: a record field type without an HDF5 mapping");
}

}  // namespace

compound_layout make_layout(const record_schema& schema, const std::string& path, hid_t stored) {
  compound_layout layout;
  const auto& fields = schema.fields;
  h5_handle string_type = vlen_string_type(path);
  std::vector<member_type> members;
  for (const auto& f : fields) members.push_back(member_of(f.type, string_type.get()));
  std::size_t offset = 0, packed = 0;
  for (const auto& m : members) {
    offset = (offset + m.size - 1) / m.size * m.size;  // every member type's alignment is its size
    layout.offsets.push_back(offset);
    offset += m.size;
    packed += m.size;
  }
  const std::size_t max_align = sizeof(double);
  layout.row_size = (offset + max_align - 1) / max_align * max_align;
  layout.memory_type = type_handle(H5Tcreate(H5T_COMPOUND, layout.row_size), "H5Tcreate(memory compound)", path);
  layout.file_type = type_handle(H5Tcreate(H5T_COMPOUND, packed), "H5Tcreate(file compound)", path);
  packed = 0;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const char* read_as = fields[i].name;
    if (stored >= 0 && fields[i].former_name != nullptr && H5Tget_member_index(stored, fields[i].name) < 0 &&
        H5Tget_member_index(stored, fields[i].former_name) >= 0)
      read_as = fields[i].former_name;
    check(H5Tinsert(layout.memory_type.get(), read_as, layout.offsets[i], members[i].memory),
          std::string("H5Tinsert(") + read_as + ")", path);
    check(H5Tinsert(layout.file_type.get(), fields[i].name, packed, members[i].file),
          std::string("H5Tinsert(") + fields[i].name + ")", path);
    packed += members[i].size;
  }
  return layout;
}

std::vector<unsigned char> pack_rows(const record_batch& batch, const record_schema& schema,
                                     const compound_layout& layout) {
  std::vector<unsigned char> buffer(layout.row_size * batch.size(), 0);
  for (std::size_t r = 0; r < batch.size(); ++r) {
    unsigned char* row = buffer.data() + r * layout.row_size;
    for (std::size_t i = 0; i < schema.fields.size(); ++i) {
      unsigned char* dst = row + layout.offsets[i];
      std::visit(
          [&](const auto& value) {
            using T = std::decay_t<decltype(value)>;
            if constexpr (std::is_same_v<T, std::string_view>) {
              const char* p = value.data();  // NUL-terminated (field_value)
              std::memcpy(dst, &p, sizeof p);
            } else if constexpr (std::is_same_v<T, bool>) {
              const std::uint8_t v = value ? 1 : 0;
              std::memcpy(dst, &v, sizeof v);
            } else {
              std::memcpy(dst, &value, sizeof value);
            }
          },
          schema.read(batch.record(r), i));
    }
  }
  return buffer;
}

void create_record_dataset(hid_t group, const record_schema& schema, const std::string& path) {
  const auto layout = make_layout(schema, path);
  create_row_dataset(group, schema.table, layout.file_type.get(), schema.units, path);
}

void append_records(hid_t group, const record_batch& batch, const std::string& path) {
  if (batch.empty()) return;
  const auto& schema = batch.schema();
  const auto layout = make_layout(schema, path);
  const auto rows = pack_rows(batch, schema, layout);
  append_row_buffer(group, schema.table, layout.memory_type.get(), rows.data(), batch.size(), path);
}

std::size_t read_row_buffer(hid_t group, const char* name, hid_t memory_type, std::vector<unsigned char>& rows,
                            std::size_t row_size, const std::string& path) {
  const std::string what = std::string("(") + name + ")";
  h5_handle dataset = dataset_handle(H5Dopen2(group, name, H5P_DEFAULT), "H5Dopen2" + what, path);
  h5_handle space = space_handle(H5Dget_space(dataset.get()), "H5Dget_space" + what, path);
  hsize_t count = 0;
  if (H5Sget_simple_extent_dims(space.get(), &count, nullptr) != 1) fail("H5Sget_simple_extent_dims" + what, path);
  rows.assign(static_cast<std::size_t>(count) * row_size, 0);
  if (count == 0) return 0;
  check(H5Dread(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), "H5Dread" + what, path);
  return static_cast<std::size_t>(count);
}

h5_handle stored_type(hid_t group, const char* name, const std::string& path) {
  const std::string what = std::string("(") + name + ")";
  h5_handle dataset = dataset_handle(H5Dopen2(group, name, H5P_DEFAULT), "H5Dopen2" + what, path);
  return type_handle(H5Dget_type(dataset.get()), "H5Dget_type" + what, path);
}

void reclaim_row_buffer(hid_t memory_type, std::vector<unsigned char>& rows, std::size_t count) {
  if (count == 0) return;
  const hsize_t n = count;
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  if (space < 0) return;  // only reachable when HDF5 is out of memory; leaking the strings is the lesser harm
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(memory_type, space, H5P_DEFAULT, rows.data());
#else
  H5Dvlen_reclaim(memory_type, space, H5P_DEFAULT, rows.data());
#endif
  H5Sclose(space);
}

}  // namespace kstudy::archive_detail
