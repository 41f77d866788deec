#pragma once
// kstudy/kokkos_support.hpp: the helpers of every Kokkos variant (for_each_enabled_space,
// register_kokkos_variant, space_instance, ...), under the name a project outside kstudy's tree includes.
// The header lives beside the built-in variants (variants/detail/kokkos_support.hpp); cmake --install puts it
// here in place of this forwarder.
#include "../../../variants/detail/kokkos_support.hpp"
