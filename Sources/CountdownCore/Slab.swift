/// A handle into a `Slab`: a slot index with the type it indexes in its name,
/// so a session handle cannot be used as a connection's.
public struct SlabHandle<Tag>: Hashable, Sendable {
  public let index: Int32
  public init(_ index: Int32) { self.index = index }
}

/// Values in reusable slots, addressed by typed handles. A stale handle (its
/// slot freed) reads as nil; writing through one traps with the element type
/// named, in one place, instead of a bare force-unwrap at every use.
struct Slab<Element> {
  private(set) var slots: [Element?] = []
  private var free: [Int32] = []
  private(set) var count = 0

  typealias Handle = SlabHandle<Element>

  mutating func insert(_ value: Element) -> Handle {
    count += 1
    if let reused = free.popLast() {
      slots[Int(reused)] = value
      return Handle(reused)
    }
    slots.append(value)
    return Handle(Int32(slots.count - 1))
  }

  mutating func remove(_ handle: Handle) -> Element? {
    guard let value = slots[Int(handle.index)] else { return nil }
    slots[Int(handle.index)] = nil
    free.append(handle.index)
    count -= 1
    return value
  }

  func contains(_ handle: Handle) -> Bool {
    Int(handle.index) < slots.count && slots[Int(handle.index)] != nil
  }

  func get(_ handle: Handle) -> Element? {
    Int(handle.index) < slots.count ? slots[Int(handle.index)] : nil
  }

  /// The live value; a freed slot is a bug in the caller's bookkeeping.
  subscript(handle: Handle) -> Element {
    // Coroutine accessors project the slot in place: a plain getter would copy
    // the element (and retain its arrays) on every read of the hot path.
    _read {
      guard slots[Int(handle.index)] != nil else { Self.stale(handle) }
      yield slots[Int(handle.index)]!
    }
    _modify {
      guard slots[Int(handle.index)] != nil else { Self.stale(handle) }
      yield &slots[Int(handle.index)]!
    }
  }

  private static func stale(_ handle: Handle) -> Never {
    fatalError("stale \(Element.self) handle \(handle.index)")
  }
}
