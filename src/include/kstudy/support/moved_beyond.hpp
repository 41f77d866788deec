#pragma once
// What an operation's corrupt() writes: an output moved just past twice its bound, so that a gate passing
// it would pass an error beyond the bound (|new - ref| >= |new - old| - |old - ref| > bound).
#include <cmath>

namespace kstudy {

// The first float (or double) from value + 2 bound upwards that lies further than 2 bound from value.
template <class T>
T moved_beyond(T value, double bound) {
  T moved = static_cast<T>(double(value) + 2 * bound);
  while (!(std::fabs(double(moved) - double(value)) > 2 * bound)) moved = std::nextafter(moved, T(INFINITY));
  return moved;
}

}  // namespace kstudy
