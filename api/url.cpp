// Boost.URL is compiled into the program from its sources: Debian 12 ships no
// libboost_url library.
#include <boost/url/src.hpp>
