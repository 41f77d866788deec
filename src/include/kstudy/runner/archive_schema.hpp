#pragma once
#include <string>

namespace kstudy {

// Every archive table with its columns (name, type, the name an older schema used) and units, as JSON: the one
// declaration of the schema (the record tables the sinks write through) in a form other languages read.
// `kstudy schema` prints it; scripts/kstudy_py/archive_schema.json is this output, checked by a test.
std::string archive_schema_json();

}  // namespace kstudy
