#include "detail/hdf5_digest.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "detail/hdf5_util.hpp"

namespace kstudy::archive_detail {

namespace {

// FIPS 180-4 SHA-256; small enough to carry rather than tie the archive library to a crypto package.
class sha256 {
 public:
  void update(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    m_length += size;
    while (size > 0) {
      const std::size_t take = std::min(size, std::size_t(64) - m_used);
      std::memcpy(m_block.data() + m_used, p, take);
      m_used += take;
      p += take;
      size -= take;
      if (m_used == 64) {
        compress();
        m_used = 0;
      }
    }
  }
  void update(const std::string& text) { update(text.data(), text.size()); }
  void update_u64(std::uint64_t value) {
    std::uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::uint8_t>(value >> (8 * i));
    update(bytes, 8);
  }
  std::string hex() {
    const std::uint64_t bits = m_length * 8;
    const std::uint8_t one = 0x80, zero = 0;
    update(&one, 1);
    while (m_used != 56) update(&zero, 1);
    std::uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
    update(length, 8);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (const auto word : m_state)
      for (int shift = 28; shift >= 0; shift -= 4) out += digits[(word >> shift) & 0xf];
    return out;
  }

 private:
  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void compress() {
    static constexpr std::uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = std::uint32_t(m_block[4 * i]) << 24 | std::uint32_t(m_block[4 * i + 1]) << 16 |
             std::uint32_t(m_block[4 * i + 2]) << 8 | std::uint32_t(m_block[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto s = m_state;
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          s[7] + (rotr(s[4], 6) ^ rotr(s[4], 11) ^ rotr(s[4], 25)) + ((s[4] & s[5]) ^ (~s[4] & s[6])) + k[i] + w[i];
      const std::uint32_t t2 =
          (rotr(s[0], 2) ^ rotr(s[0], 13) ^ rotr(s[0], 22)) + ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
      for (int j = 7; j > 0; --j) s[j] = s[j - 1];
      s[4] += t1;
      s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; ++i) m_state[i] += s[i];
  }

  std::array<std::uint32_t, 8> m_state{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<std::uint8_t, 64> m_block{};
  std::size_t m_used = 0;
  std::uint64_t m_length = 0;
};

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

void collect_objects(hid_t group, const std::string& name, std::vector<archive_object>& out, const std::string& path,
                     int depth) {
  // The schema nests four deep (/shards/K/environment); a cycle of hard links in a damaged file must not
  // recurse for ever.
  if (depth > 16)
    throw std::runtime_error("kstudy: archive '" + path + "' is damaged: groups nest deeper than any archive's");
  out.push_back({name, false});
  std::vector<std::string> children;
  hsize_t index = 0;
  check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &children), "H5Literate(" + name + ")",
        path);
  std::sort(children.begin(), children.end());
  for (const auto& child : children) {
    const std::string child_name = (name == "/" ? "" : name) + "/" + child;
    const hid_t id = H5Oopen(group, child.c_str(), H5P_DEFAULT);
    if (id < 0) fail("H5Oopen(" + child_name + ")", path);
    const H5I_type_t type = H5Iget_type(id);
    if (type == H5I_GROUP) {
      h5_handle g(id, H5Gclose);
      collect_objects(g.get(), child_name, out, path, depth + 1);
    } else {
      H5Oclose(id);
      if (type == H5I_DATASET) out.push_back({child_name, true});
    }
  }
}

void hash_rows(hid_t dataset, sha256& hash, const std::string& path) {
  h5_handle space = space_handle(H5Dget_space(dataset), "H5Dget_space", path);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail("H5Sget_simple_extent_ndims", path);
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (count < 0) fail("H5Sget_simple_extent_npoints", path);
  hash.update("rows", 5);
  hash.update_u64(static_cast<std::uint64_t>(count));
  h5_handle file_type = type_handle(H5Dget_type(dataset), "H5Dget_type", path);
  if (H5Tget_class(file_type.get()) != H5T_COMPOUND) return;  // not a kstudy table: its rows are not ours to vouch for
  const int members = H5Tget_nmembers(file_type.get());
  if (members < 0) fail("H5Tget_nmembers", path);
  // A packed memory row: each member in its file type (little-endian, as the file stores it), strings as pointers.
  std::vector<h5_handle> types;
  std::vector<std::size_t> offsets;
  std::vector<bool> is_string;
  std::vector<std::string> names;
  std::size_t row = 0;
  for (int m = 0; m < members; ++m) {
    h5_handle member = type_handle(H5Tget_member_type(file_type.get(), unsigned(m)), "H5Tget_member_type", path);
    char* name = H5Tget_member_name(file_type.get(), unsigned(m));
    if (!name) fail("H5Tget_member_name", path);
    names.emplace_back(name);
    H5free_memory(name);
    const bool vlen = H5Tget_class(member.get()) == H5T_STRING &&
                      check_tri(H5Tis_variable_str(member.get()), "H5Tis_variable_str", path);
    if (vlen) {
      h5_handle memory = vlen_string_type(path);
      check(H5Tset_cset(memory.get(), H5Tget_cset(member.get())), "H5Tset_cset", path);
      member = std::move(memory);
    }
    const std::size_t size = vlen ? sizeof(char*) : H5Tget_size(member.get());
    if (size == 0) fail("H5Tget_size", path);
    offsets.push_back(row);
    row += size;
    is_string.push_back(vlen);
    types.push_back(std::move(member));
  }
  if (count == 0 || row == 0) return;
  h5_handle memory_type = type_handle(H5Tcreate(H5T_COMPOUND, row), "H5Tcreate", path);
  for (int m = 0; m < members; ++m)
    check(H5Tinsert(memory_type.get(), names[m].c_str(), offsets[m], types[m].get()), "H5Tinsert", path);
  std::vector<unsigned char> rows(static_cast<std::size_t>(count) * row, 0);
  check(H5Dread(dataset, memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), "H5Dread", path);
  struct reclaim_guard {
    hid_t type, space;
    std::vector<unsigned char>& rows;
    ~reclaim_guard() {
#if H5_VERSION_GE(1, 12, 0)
      H5Treclaim(type, space, H5P_DEFAULT, rows.data());
#else
      H5Dvlen_reclaim(type, space, H5P_DEFAULT, rows.data());
#endif
    }
  } guard{memory_type.get(), space.get(), rows};
  for (int m = 0; m < members; ++m) {
    hash.update(names[m].c_str(), names[m].size() + 1);
    const std::size_t size = is_string[m] ? sizeof(char*) : H5Tget_size(types[m].get());
    for (hssize_t r = 0; r < count; ++r) {
      const unsigned char* cell = rows.data() + std::size_t(r) * row + offsets[m];
      if (is_string[m]) {
        const char* text = nullptr;
        std::memcpy(&text, cell, sizeof text);
        const std::size_t length = text ? std::strlen(text) : 0;
        hash.update_u64(length);
        hash.update(text, length);
      } else {
        hash.update(cell, size);
      }
    }
  }
}

h5_handle open_object(hid_t file, const archive_object& object, const std::string& path) {
  const hid_t id = H5Oopen(file, object.name.c_str(), H5P_DEFAULT);
  if (id < 0) fail("H5Oopen(" + object.name + ")", path);
  return {id, H5Oclose};
}

}  // namespace

std::string object_digest(hid_t object, bool is_dataset, const std::string& path) {
  sha256 hash;
  hash.update("kstudy-digest-1", 16);
  for (const auto& [name, value] : read_string_attributes(object, path)) {
    if (name == digest_attribute) continue;
    hash.update(name.c_str(), name.size() + 1);
    hash.update_u64(value.size());
    hash.update(value);
  }
  if (is_dataset) {
    hash_rows(object, hash, path);
  } else {
    // A group vouches for the names of its members: a flipped byte in a name would otherwise hide an
    // experiment or a table.
    std::vector<std::string> children;
    hsize_t index = 0;
    check(H5Literate(object, H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &children), "H5Literate", path);
    std::sort(children.begin(), children.end());
    hash.update("links", 6);
    for (const auto& child : children) hash.update(child.c_str(), child.size() + 1);
  }
  return hash.hex();
}

std::vector<archive_object> archive_objects(hid_t file, const std::string& path) {
  std::vector<archive_object> objects;
  h5_handle root = open_group(file, "/", path);
  collect_objects(root.get(), "/", objects, path, 0);
  return objects;
}

void remove_digests(hid_t file, const std::string& path) {
  for (const auto& object : archive_objects(file, path)) {
    h5_handle id = open_object(file, object, path);
    if (check_tri(H5Aexists(id.get(), digest_attribute), "H5Aexists(" + object.name + ")", path))
      check(H5Adelete(id.get(), digest_attribute), "H5Adelete(" + object.name + ")", path);
  }
}

void write_digests(hid_t file, const std::string& path) {
  for (const auto& object : archive_objects(file, path)) {
    h5_handle id = open_object(file, object, path);
    write_string_attribute(id.get(), digest_attribute, object_digest(id.get(), object.is_dataset, path), path);
  }
}

std::vector<std::string> damaged_objects(hid_t file, const std::string& path) {
  std::vector<std::string> damaged;
  for (const auto& object : archive_objects(file, path)) {
    h5_handle id = open_object(file, object, path);
    // Computed for every object, checksum or not: it reads everything a reader will, so that damage HDF5
    // reports (or crashes on) surfaces here.
    const std::string digest = object_digest(id.get(), object.is_dataset, path);
    if (check_tri(H5Aexists(id.get(), digest_attribute), "H5Aexists(" + object.name + ")", path) &&
        read_string_attribute(id.get(), digest_attribute, path) != digest)
      damaged.push_back(object.name);
  }
  return damaged;
}

}  // namespace kstudy::archive_detail
