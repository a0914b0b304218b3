/// A handle into a `Slab`: a slot index with the type it indexes in its name,
/// so a session handle cannot be used as a connection's.
public struct SlabHandle<Tag>: Hashable, Sendable {
  public let index: Int32
  public init(_ index: Int32) { self.index = index }
}

/// Values in reusable slots, addressed by typed handles. Reading or writing
/// through a stale handle (its slot freed) traps with the element type named,
/// in one place, instead of a bare force-unwrap at every use.
///
/// Slots hold plain elements, not optionals, with a separate live flag: the
/// accessors then project an element in place, where unwrapping an optional
/// slot would copy it (and retain its arrays) on every read of the hot path.
struct Slab<Element> {
  private var slots: [Element] = []
  private var live: [Bool] = []
  private var free: [Int32] = []
  /// What a freed slot holds until it is reused: nothing worth retaining.
  private let vacant: Element
  private(set) var count = 0

  typealias Handle = SlabHandle<Element>

  init(vacant: Element) { self.vacant = vacant }

  mutating func insert(_ value: Element) -> Handle {
    count += 1
    if let reused = free.popLast() {
      slots[Int(reused)] = value
      live[Int(reused)] = true
      return Handle(reused)
    }
    slots.append(value)
    live.append(true)
    return Handle(Int32(slots.count - 1))
  }

  /// Frees a slot and hands back what it held, or nil if it was already free.
  mutating func remove(_ handle: Handle) -> Element? {
    guard contains(handle) else { return nil }
    let index = Int(handle.index)
    let value = slots[index]
    slots[index] = vacant
    live[index] = false
    free.append(handle.index)
    count -= 1
    return value
  }

  func contains(_ handle: Handle) -> Bool {
    let index = Int(handle.index)
    return index >= 0 && index < live.count && live[index]
  }

  subscript(handle: Handle) -> Element {
    _read {
      guard contains(handle) else { Self.stale(handle) }
      yield slots[Int(handle.index)]
    }
    _modify {
      guard contains(handle) else { Self.stale(handle) }
      yield &slots[Int(handle.index)]
    }
  }

  private static func stale(_ handle: Handle) -> Never {
    fatalError("stale \(Element.self) handle \(handle.index)")
  }
}
