//===- SafeTensors.cpp - Hugging Face safetensors I/O ---------------------===//

#include "kiln/Runtime/SafeTensors.h"
#include "kiln/Support/Error.h"
#include "kiln/Support/Json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {

using json = nlohmann::json;

/// Upper bound on the JSON header; the Rust reference implementation uses the
/// same 100 MB limit to refuse absurd lengths before allocating or parsing.
static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
static constexpr const char *kSupportedDTypes = "F32, F16, BF16, I64, I32";

static std::string errnoText() { return std::strerror(errno); }

static std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty() || dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

/// stat() wrapper: false if `path` does not exist, throws on other errors.
static bool statPath(const std::string &path, struct stat &st) {
  if (::stat(path.c_str(), &st) == 0)
    return true;
  if (errno == ENOENT)
    return false;
  fail("{}: {}", path, errnoText());
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

namespace {
/// Validates one header entry; every message names the file and tensor.
struct EntryParser {
  const std::string &path;
  const std::string &name;
  uint64_t dataSize;

  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args &&...args) const {
    fail("{}: tensor '{}': {}", path, name,
         fmt::format(format, std::forward<Args>(args)...));
  }

  /// A JSON integer >= 0 (rejects floats like 2.0 and negatives).
  uint64_t nonNegative(const json &v, const char *field) const {
    if (v.is_number_unsigned())
      return v.get<uint64_t>();
    if (v.is_number_integer())
      error("{} contains negative value {}", field, v.get<int64_t>());
    error("{} must contain integers, got {}", field, v.dump());
  }

  DType dtype(const json &entry) const {
    auto it = entry.find("dtype");
    if (it == entry.end())
      error("missing field 'dtype'");
    if (!it->is_string())
      error("'dtype' must be a string, got {}", it->dump());
    DType d;
    if (!parseDType(it->get<std::string>(), d))
      error("unsupported dtype '{}' (supported dtypes: {})", it->get<std::string>(),
            kSupportedDTypes);
    return d;
  }

  Shape shape(const json &entry) const {
    auto it = entry.find("shape");
    if (it == entry.end())
      error("missing field 'shape'");
    if (!it->is_array())
      error("'shape' must be an array, got {}", it->dump());
    Shape s;
    for (const json &d : *it) {
      uint64_t v = nonNegative(d, "shape");
      if (v > uint64_t(std::numeric_limits<int64_t>::max()))
        error("shape dimension {} is too large", v);
      s.push_back(int64_t(v));
    }
    return s;
  }

  std::pair<uint64_t, uint64_t> offsets(const json &entry) const {
    auto it = entry.find("data_offsets");
    if (it == entry.end())
      error("missing field 'data_offsets'");
    if (!it->is_array() || it->size() != 2)
      error("'data_offsets' must be an array of 2 integers, got {}", it->dump());
    uint64_t begin = nonNegative((*it)[0], "data_offsets");
    uint64_t end = nonNegative((*it)[1], "data_offsets");
    if (begin > end)
      error("data_offsets [{}, {}] has begin > end", begin, end);
    if (end > dataSize)
      error("data_offsets [{}, {}] extends past the end of the {}-byte data buffer",
            begin, end, dataSize);
    return {begin, end};
  }

  /// shape x dtype size in bytes, refusing overflow (a hostile shape could
  /// otherwise wrap around to match the byte span).
  uint64_t byteSize(const Shape &s, DType d) const {
    uint64_t bytes = dtypeSize(d);
    for (int64_t dim : s)
      if (__builtin_mul_overflow(bytes, uint64_t(dim), &bytes))
        error("shape {} x {} overflows", shapeToString(s), dtypeName(d));
    return bytes;
  }
};
} // namespace

std::shared_ptr<SafeTensorsFile> SafeTensorsFile::open(const std::string &path) {
  // Refuse anything but a regular file before opening it: open() on a FIFO
  // blocks until a writer appears.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    fail("{}: cannot open: {}", path, errnoText());
  if (!S_ISREG(st.st_mode))
    fail("{}: is {}, not a regular file", path, fileKind(st.st_mode));
  // O_NONBLOCK: a FIFO swapped in after the check must not block open()
  // either; the fstat() below refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    fail("{}: cannot open: {}", path, errnoText());
  if (::fstat(fd, &st) != 0) {
    std::string why = errnoText();
    ::close(fd);
    fail("{}: cannot stat: {}", path, why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: is {}, not a regular file", path, fileKind(st.st_mode));
  }
  size_t size = size_t(st.st_size);
  // Checked before mmap: mapping zero bytes is an error in itself.
  if (size < 8) {
    ::close(fd);
    fail("{}: file is {} bytes, too small for a safetensors file (the header "
         "length alone is 8 bytes)", path, size);
  }
  void *addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  std::string mmapError = addr == MAP_FAILED ? errnoText() : "";
  ::close(fd); // the mapping stays valid without the descriptor
  if (addr == MAP_FAILED)
    fail("{}: cannot mmap: {}", path, mmapError);

  std::shared_ptr<SafeTensorsFile> file(new SafeTensorsFile());
  file->path_ = path;
  file->fileSize_ = size;
  file->mapping_ = std::shared_ptr<const void>(
      addr, [size](const void *p) { ::munmap(const_cast<void *>(p), size); });
  const auto *base = static_cast<const unsigned char *>(addr);

  uint64_t headerLen = 0; // u64 little-endian, read bytewise for portability
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | base[i];
  if (headerLen > size - 8)
    fail("{}: header length {} exceeds the {} bytes after the length field "
         "(file is {} bytes; truncated or not a safetensors file?)",
         path, headerLen, size - 8, size);
  if (headerLen > kMaxHeaderBytes)
    fail("{}: header length {} exceeds the {}-byte limit", path, headerLen, kMaxHeaderBytes);
  uint64_t dataSize = size - 8 - headerLen;
  file->dataBase_ = base + 8 + headerLen;

  json header = parseJson(std::string(base + 8, base + 8 + headerLen), path + ": header");
  if (!header.is_object())
    fail("{}: header must be a JSON object, got {}", path, header.type_name());

  struct Range {
    uint64_t begin, end;
    const std::string *name;
  };
  std::vector<Range> ranges;
  for (const auto &[name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        fail("{}: '__metadata__' must be an object, got {}", path, value.type_name());
      for (const auto &[key, v] : value.items()) {
        if (!v.is_string())
          fail("{}: '__metadata__' entry '{}' must be a string, got {}", path, key, v.dump());
        file->metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    EntryParser p{path, name, dataSize};
    if (!value.is_object())
      p.error("entry must be an object, got {}", value.type_name());
    Entry e;
    e.dtype = p.dtype(value);
    e.shape = p.shape(value);
    auto [begin, end] = p.offsets(value);
    uint64_t need = p.byteSize(e.shape, e.dtype);
    if (end - begin != need)
      p.error("shape {} x {} needs {} bytes but data_offsets span {}",
              shapeToString(e.shape), dtypeName(e.dtype), need, end - begin);
    e.begin = size_t(begin);
    e.end = size_t(end);
    auto [it, inserted] = file->entries_.emplace(name, std::move(e));
    (void)inserted; // JSON object keys are already unique after parsing
    ranges.push_back({begin, end, &it->first});
  }

  // Sorted by begin, any overlap shows up between neighbours.
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return std::tie(a.begin, a.end, *a.name) < std::tie(b.begin, b.end, *b.name);
  });
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].begin < ranges[i - 1].end)
      fail("{}: tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", path,
           *ranges[i].name, ranges[i].begin, ranges[i].end, *ranges[i - 1].name,
           ranges[i - 1].begin, ranges[i - 1].end);
    file->names_.push_back(*ranges[i].name);
  }
  return file;
}

SafeTensorsFile::~SafeTensorsFile() = default; // mapping_'s deleter unmaps

bool SafeTensorsFile::contains(const std::string &name) const {
  return entries_.count(name) != 0;
}

Tensor SafeTensorsFile::get(const std::string &name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    fail("{}: no tensor named '{}'", path_, name);
  const Entry &e = it->second;
  const unsigned char *data = dataBase_ + e.begin;
  if (reinterpret_cast<uintptr_t>(data) % dtypeSize(e.dtype) != 0) {
    // The format lets a header end anywhere (writers pad it to 8 bytes, a
    // file need not): a tensor whose bytes are not aligned to its elements
    // is read from an aligned copy, not in place.
    Tensor copy = Tensor::uninitialized(e.dtype, e.shape);
    std::memcpy(copy.mutableData<unsigned char>(), data, copy.nbytes());
    return copy;
  }
  return Tensor(e.dtype, e.shape, mapping_, data);
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

namespace {
/// Removes the temporary file unless released after the final rename.
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0)
      ::close(fd);
    if (!keep)
      ::unlink(path.c_str());
  }
};
} // namespace

void writeSafeTensors(const std::string &path, const TensorMap &tensors,
                      const std::map<std::string, std::string> &metadata) {
  // Data layout: widest dtype first, then by name. With all element sizes
  // powers of two this aligns every tensor to its element size while keeping
  // the buffer contiguous, which the reference reader requires (it rejects
  // gaps); the HF writer orders tensors the same way.
  std::vector<const TensorMap::value_type *> order;
  for (const auto &kv : tensors) {
    if (kv.first == "__metadata__")
      fail("{}: '__metadata__' is reserved and cannot name a tensor", path);
    if (!kv.second.defined())
      fail("{}: tensor '{}' has no data", path, kv.first);
    order.push_back(&kv);
  }
  std::stable_sort(order.begin(), order.end(), [](auto *a, auto *b) {
    return dtypeSize(a->second.dtype()) > dtypeSize(b->second.dtype());
  });

  json header = json::object(); // std::map-backed: keys come out sorted
  uint64_t offset = 0;
  for (const auto *kv : order) {
    const Tensor &t = kv->second;
    header[kv->first] = {{"dtype", dtypeName(t.dtype())},
                         {"shape", t.shape()},
                         {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Pad with spaces (valid JSON whitespace) so the data buffer starts 8-aligned.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');

  unsigned char lenBytes[8];
  for (int i = 0; i < 8; ++i)
    lenBytes[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  TempFile tmp;
  tmp.path = temporaryPathFor(path);
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    tmp.keep = true; // nothing was created, and never unlink someone else's file
    fail("{}: cannot create temporary file {}: {}", path, tmp.path, errnoText());
  }
  auto writeAll = [&](const void *data, size_t n) {
    const char *p = static_cast<const char *>(data);
    while (n > 0) {
      ssize_t w = ::write(tmp.fd, p, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        fail("{}: write failed: {}", path, errnoText());
      p += w;
      n -= size_t(w);
    }
  };
  writeAll(lenBytes, sizeof lenBytes);
  writeAll(text.data(), text.size());
  for (const auto *kv : order)
    if (kv->second.nbytes())
      writeAll(kv->second.rawData(), kv->second.nbytes());
  // fsync before rename so a crash never leaves a renamed-but-empty file.
  if (::fsync(tmp.fd) != 0)
    fail("{}: fsync failed: {}", path, errnoText());
  int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0)
    fail("{}: close failed: {}", path, errnoText());
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    fail("{}: cannot rename {} into place: {}", path, tmp.path, errnoText());
  tmp.keep = true;
}

//===----------------------------------------------------------------------===//
// Checkpoint
//===----------------------------------------------------------------------===//

/// Reads and parses `indexPath`, returning its weight_map as name -> shard.
static std::map<std::string, std::string> readWeightMap(const std::string &indexPath) {
  std::string text = readFile(indexPath); // refuses a FIFO or a directory
  json index = parseJson(text, indexPath);
  if (!index.is_object())
    fail("{}: must be a JSON object, got {}", indexPath, index.type_name());
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object())
    fail("{}: missing 'weight_map' object", indexPath);
  std::map<std::string, std::string> result;
  for (const auto &[name, shard] : wm->items()) {
    if (!shard.is_string() || shard.get<std::string>().empty())
      fail("{}: weight_map entry '{}' must be a shard file name, got {}", indexPath,
           name, shard.dump());
    result[name] = shard.get<std::string>();
  }
  return result;
}

/// The path of shard `shardName` (weight_map entry `name` of `indexPath`)
/// in model directory `dir`; refused when absolute or, symlinks resolved,
/// outside the directory: an index must not make Kiln read other files.
static std::string shardInside(const std::string &dir, const std::string &indexPath,
                               const std::string &name, const std::string &shardName) {
  if (shardName.front() == '/')
    fail("{}: weight_map entry '{}' names '{}', an absolute path: shards are files of the "
         "model directory",
         indexPath, name, shardName);
  std::string shard = joinPath(dir, shardName);
  char root[PATH_MAX], resolved[PATH_MAX];
  // A shard that does not resolve (missing) is reported by its open.
  if (!::realpath(dir.c_str(), root) || !::realpath(shard.c_str(), resolved))
    return shard;
  std::string inside = std::string(root) + "/";
  if (std::string(resolved).compare(0, inside.size(), inside) != 0)
    fail("{}: weight_map entry '{}' names '{}', which resolves to {}, outside the model "
         "directory {}",
         indexPath, name, shardName, resolved, root);
  return shard;
}

Checkpoint Checkpoint::open(const std::string &path) {
  Checkpoint ckpt;
  ckpt.path_ = path;
  auto addAll = [&](const std::string &file) {
    auto st = SafeTensorsFile::open(file);
    for (const std::string &name : st->names())
      ckpt.byName_[name] = st;
  };

  struct stat st;
  if (!statPath(path, st))
    fail("{}: {}", path, std::strerror(ENOENT));
  if (S_ISREG(st.st_mode)) {
    addAll(path);
    ckpt.readFusedExperts();
    return ckpt;
  }
  if (!S_ISDIR(st.st_mode))
    fail("{}: is {}, not a regular file or directory", path, fileKind(st.st_mode));

  std::string indexPath = joinPath(path, "model.safetensors.index.json");
  std::string singlePath = joinPath(path, "model.safetensors");
  struct stat ignored;
  if (statPath(indexPath, ignored)) {
    std::map<std::string, std::shared_ptr<SafeTensorsFile>> shards; // each opened once
    for (const auto &[name, shardName] : readWeightMap(indexPath)) {
      auto &shard = shards[shardName];
      if (!shard)
        shard = SafeTensorsFile::open(shardInside(path, indexPath, name, shardName));
      if (!shard->contains(name))
        fail("{}: tensor '{}' is listed in weight_map but missing from shard {}",
             indexPath, name, shard->path());
      ckpt.byName_[name] = shard;
    }
    ckpt.readFusedExperts();
    return ckpt;
  }
  if (statPath(singlePath, ignored)) {
    addAll(singlePath);
    ckpt.readFusedExperts();
    return ckpt;
  }
  fail("{}: no model.safetensors or model.safetensors.index.json", path);
}

void Checkpoint::readFusedExperts() {
  std::vector<std::string> stored;
  for (const auto &kv : byName_)
    stored.push_back(kv.first);
  fusedMembers_ = fusedExpertMembers(
      stored, [&](const std::string &name) { return byName_.at(name)->get(name); }, path_);
  for (const auto &[member, location] : fusedMembers_) {
    auto it = byName_.find(location.fusedName);
    if (it == byName_.end())
      continue; // moved already, for an earlier member
    fused_.insert(*it);
    byName_.erase(it);
  }
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto &kv : byName_)
    out.push_back(kv.first);
  for (const auto &kv : fusedMembers_)
    out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

bool Checkpoint::contains(const std::string &name) const {
  return byName_.count(name) != 0 || fusedMembers_.count(name) != 0;
}

Tensor Checkpoint::get(const std::string &name) const {
  if (auto it = byName_.find(name); it != byName_.end())
    return it->second->get(name);
  auto member = fusedMembers_.find(name);
  if (member == fusedMembers_.end())
    fail("{}: no tensor named '{}'", path_, name);
  const std::string &fused = member->second.fusedName;
  return fusedExpertView(fused_.at(fused)->get(fused), member->second);
}

} // namespace kiln
