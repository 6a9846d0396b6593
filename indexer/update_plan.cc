#include "indexer/update_plan.h"

#include <set>
#include <unordered_set>

namespace lookalike {

UpdatePlan PlanUpdate(const WalkResult& walk, const std::string& root, const Store& store,
                      std::unordered_map<std::string, ProcessedFile>* reusable) {
  UpdatePlan plan;
  // Images stored before thumbnails were kept.
  const bool keeps_thumbnails = store.keeps_thumbnails();
  std::unordered_set<uint64_t> with_thumbnail;
  if (keeps_thumbnails)
    for (uint64_t id : store.IdsWithThumbnails()) with_thumbnail.insert(id);
  for (const std::string& path : walk.files) {
    std::optional<ImageRecord> existing = store.FindByPath(path);
    const bool needs_thumbnail =
        existing && keeps_thumbnails && !with_thumbnail.count(existing->id);
    if (existing) {
      const auto st = StatFile(path);
      if (st && st->size_bytes == existing->size_bytes && st->mtime_ns == existing->mtime_ns) {
        if (needs_thumbnail)
          plan.tasks.push_back(FileTask{path, std::move(existing), true});
        else
          ++plan.unchanged;
        continue;
      }
    }
    auto it = reusable->find(path);
    if (it != reusable->end()) {
      it->second.existing = existing;
      plan.ready.push_back(std::move(it->second));
      reusable->erase(it);
    } else {
      plan.tasks.push_back(FileTask{path, std::move(existing), needs_thumbnail});
    }
  }
  reusable->clear();

  const std::set<std::string> listed(walk.files.begin(), walk.files.end());
  store.ForEachImage([&](const ImageRecord& r) {
    if (!IsUnder(r.path, root) || listed.count(r.path)) return;
    for (const FileError& e : walk.errors)
      if (IsUnder(r.path, e.path)) return;
    plan.gone.push_back(r);
  });
  return plan;
}

}  // namespace lookalike
