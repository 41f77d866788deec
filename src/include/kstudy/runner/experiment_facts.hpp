#pragma once
#include <map>
#include <string>

namespace kstudy {

// What this build's registries know about an experiment that its definition does not say, as the archive
// attributes an experiment's group carries beside its definition, so a reader takes them from the archive rather
// than from a list of its own:
//   steady_state     "true" / "false": the kind's experiment_kind::steady_state (absent for a kind this build
//                    does not run);
//   headline_points  JSON {operation: [extents...]}: each named operation's operation_info::headline_point (absent
//                    when none declares one).
std::map<std::string, std::string> experiment_facts(const std::string& definition_json);

}  // namespace kstudy
