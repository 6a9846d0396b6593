#include "tools/verify_flags.h"

#include <stdexcept>
#include <string>

namespace lookalike {

void DeclareVerifyFlags(FlagGroup* g, VerifyOptions* o, const VerifyOptions& d) {
  g->Value("match-dims", &o->match_dims, d.match_dims,
           "verification searches nearest neighbours in the query's N principal components, "
           "re-scoring the closest exactly (0 = exact brute force)");
  g->Text("ransac", d.ransac == RansacMethod::kUsac ? "usac" : "classic",
          "homography fit in verification: usac (LO-RANSAC, OpenCV's USAC) | classic (OpenCV's "
          "RANSAC)",
          [o](const std::string& v) {
            if (v == "usac")
              o->ransac = RansacMethod::kUsac;
            else if (v == "classic")
              o->ransac = RansacMethod::kClassic;
            else
              throw std::invalid_argument("--ransac must be usac or classic, got '" + v + "'");
          });
}

}  // namespace lookalike
