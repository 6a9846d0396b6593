#include "tools/dedup_flags.h"

#include <stdexcept>
#include <string>

namespace lookalike {

void DeclareDedupGroupFlags(FlagGroup* g, DedupOptions* o) {
  const DedupOptions d;
  g->Text("level", MatchLevelName(d.level),
          "weakest match level of a group's pairs: identical (the same bytes) | copy (the same "
          "picture edited) | part (one shows a part of the other) | view (another shot of the "
          "same scene: similar shots, not duplicates)",
          [o](const std::string& v) {
            try {
              o->level = ParseMatchLevel(v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(std::string("--level: ") + e.what());
            }
          });
  g->Text("keep", KeepRuleName(d.keep),
          "which member of a group to keep: original (the one the others are edits of: "
          "the most picture, then resolution, colour, tones, EXIF, the least lossy encoding; "
          "then pixels, the oldest, the shortest path) | newest | oldest (modification time) | "
          "largest (pixels, then file size) | path (the shortest path)",
          [o](const std::string& v) {
            try {
              o->keep = ParseKeepRule(v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(std::string("--keep: ") + e.what());
            }
          });
  g->Paths("keep-in", &o->keep_in,
           "reference folder (repeatable): its images are always kept, keep their group, and are "
           "never offered for removal or moved");
}

}  // namespace lookalike
