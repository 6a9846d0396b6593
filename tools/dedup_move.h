// `dedup --move-to DIR` and `dedup --undo`: moving duplicates out of a
// collection, crash-safe and reversible.
//
// Every file to move goes to DIR under its path relative to a root (the
// common folder of the groups' images). Before each move a line naming it
// is appended to DIR's manifest and fsynced (a write-ahead log), so a run
// killed at any moment leaves every file whole at its origin, in DIR, or,
// only in the middle of a move between file systems, at both with the same
// bytes; running the same command again, or `--undo`, finishes the job from
// the manifest and what it finds on disk. A move is a rename that never
// replaces (renameat2 RENAME_NOREPLACE; a hard link and an unlink where the
// file system lacks it); between file systems, a copy to a temporary name
// beside the destination, fsynced, renamed into place without replacing,
// then the origin unlinked. Nothing existing is ever overwritten or removed
// except an origin whose copy is verified in place, or a temporary copy of
// this module's own.
//
// The manifest (DIR/lookalike-moves.tsv) is text: a header line
// `lookalike-moves<TAB>1<TAB>root<TAB>ROOT`, then one line per move,
// `move<TAB>ORIGIN<TAB>DESTINATION<TAB>SIZE<TAB>MTIME_NS`, paths escaped as
// the CLI's TSV escapes them (tools/output.h, EscapeField). A last line
// without its newline (a write cut short) is ignored and overwritten.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lookalike {

inline constexpr char kMoveManifestName[] = "lookalike-moves.tsv";

// One file to move, with what the database recorded of it: it is moved only
// while it still has that size and modification time.
struct MoveItem {
  std::string path;  // absolute
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
};

struct MoveRequest {
  std::vector<MoveItem> items;
  std::string to_dir;  // absolute; created if missing
  std::string root;    // absolute folder every item lies under
  // Never moved, whatever `items` says: the groups' keepers and the
  // reference folders (--keep-in).
  std::vector<std::string> keepers;
  std::vector<std::string> keep_in;
};

struct MoveReport {
  std::string manifest;  // its path
  int64_t moved = 0;     // moved (or put back) by this run
  int64_t already = 0;   // found done by an earlier run
  // One line per file left where it was, naming it and the reason (changed
  // since indexing, destination taken, vanished, a keeper, I/O errors).
  std::vector<std::string> problems;
};

// Moves request.items into request.to_dir as the header describes. Throws
// std::runtime_error (naming the path and the system error) only when the
// manifest cannot be created or written, after which nothing more is moved;
// a file that cannot be moved is a problem in the report and the run goes on.
MoveReport MoveFiles(const MoveRequest& request);

// Puts back every file the manifest `manifest_or_dir` (the file, or the
// folder holding kMoveManifestName) records, last move first; idempotent.
// Leaves a file in the folder when its origin holds other bytes now (a
// problem in the report). Removes the folders under the move-to folder left
// empty. Throws std::runtime_error when there is no readable manifest.
MoveReport UndoMoves(const std::string& manifest_or_dir);

}  // namespace lookalike
