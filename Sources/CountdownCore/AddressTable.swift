/// Client addresses, each held once however many viewers share it, with the
/// running or paused sessions started from it. A viewer keeps only a 4-byte
/// index; an address goes when its last holder (a viewer, or a command on
/// its way) and its last session do.
struct AddressTable {
  typealias Index = Int32

  private var indices: [String: Index] = [:]
  private var names: [String] = []
  /// Per index: connections and commands that hold the address, and
  /// sessions it holds against its cap (running or paused ones it started,
  /// plus starts in flight).
  private var holders: [Int32] = []
  private var sessionCounts: [Int32] = []
  /// Per index (key mode): sessions created from the address and not yet forgotten.
  private var createdCounts: [Int32] = []
  private var free: [Index] = []

  /// Distinct addresses held (for tests).
  var count: Int { indices.count }

  /// A connection from `name` opened.
  mutating func hold(_ name: String) -> Index {
    let index: Index
    if let known = indices[name] {
      index = known
    } else if let reused = free.popLast() {
      index = reused
      names[Int(index)] = name
      indices[name] = index
    } else {
      index = Index(names.count)
      names.append(name)
      holders.append(0)
      sessionCounts.append(0)
      createdCounts.append(0)
      indices[name] = index
    }
    holders[Int(index)] += 1
    return index
  }

  /// One more holder of an address already held.
  mutating func retain(_ index: Index) { holders[Int(index)] += 1 }

  mutating func release(_ index: Index) {
    holders[Int(index)] -= 1
    releaseIfUnused(index)
  }

  /// The address an index holds ("" for none).
  func name(of index: Index) -> String {
    index >= 0 && Int(index) < names.count ? names[Int(index)] : ""
  }

  func sessions(of index: Index) -> Int { Int(sessionCounts[Int(index)]) }

  mutating func addSession(_ index: Index) { sessionCounts[Int(index)] += 1 }

  mutating func removeSession(_ index: Index) {
    sessionCounts[Int(index)] -= 1
    releaseIfUnused(index)
  }

  func created(by index: Index) -> Int { Int(createdCounts[Int(index)]) }

  mutating func addCreated(_ index: Index) { createdCounts[Int(index)] += 1 }

  mutating func removeCreated(_ index: Index) {
    createdCounts[Int(index)] -= 1
    releaseIfUnused(index)
  }

  private mutating func releaseIfUnused(_ index: Index) {
    guard holders[Int(index)] == 0, sessionCounts[Int(index)] == 0, createdCounts[Int(index)] == 0
    else { return }
    indices[names[Int(index)]] = nil
    names[Int(index)] = ""
    free.append(index)
  }
}
