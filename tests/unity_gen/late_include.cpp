// A test source the unity generator must refuse (ctest unity_gen_late_include): its second
// #include comes after a declaration, so in a unity file it would land inside a namespace.
#include <vector>

std::vector<int> v;

#include <string>
