// A check of an HDF5 file's global heap collections, read as bytes before HDF5 reads them.
#pragma once

#include <string>

namespace kstudy::archive_detail {

// Empty when every global heap collection in the file at `path` holds objects that lie inside it and every
// string attribute refers to an object that is there and fits its stored length; otherwise a phrase naming
// the first that does not ("global heap collection at byte 4096 ...", "string at byte 6208 refers to ...").
// The file is read as bytes, never through HDF5: HDF5 1.10 follows a string's heap reference without checking
// it (H5HG_read indexes the object table by the stored index and copies the object by its stored length), so
// a damaged one reads and writes past its buffers, and whether that crashes depends on the heap layout of the
// process reading it: a child that read the file unharmed is no proof for its parent.
std::string damaged_global_heap(const std::string& path);

}  // namespace kstudy::archive_detail
