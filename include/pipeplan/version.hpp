#pragma once
/// \file
/// The pipeplan version, written into every plan's `generator`.

namespace pipeplan {

/// Semantic version of this build.
inline constexpr const char* kVersion = "0.1.0";

}  // namespace pipeplan
