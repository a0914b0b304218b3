import CountdownCore
import Foundation
import Testing

@testable import SQLiteStore

@Suite struct OpeningTests {
  /// A version-1 file (before key hashes), as that version wrote it, frozen here.
  static let versionOne = """
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY NOT NULL,
      phase TEXT NOT NULL CHECK (phase IN ('idle', 'running', 'paused', 'finished')),
      duration INTEGER NOT NULL,
      ends_at INTEGER,
      remaining_ms INTEGER,
      finished_label TEXT,
      seq INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
    INSERT INTO meta VALUES ('epoch', '1d017e78d0a5d052');
    INSERT INTO sessions VALUES ('talk', 'running', 2400, 1796024364226, NULL, 'Time!', 12, 3, 1796021964226);
    INSERT INTO sessions VALUES ('break', 'paused', 600, NULL, 123456, NULL, 4, 2, 1796021000000);
    PRAGMA user_version = 1;
    """

  /// A version-1 file is migrated in place: its rows and epoch load, it is
  /// version 2 afterwards, and key hashes can be stored in it.
  @Test func migratesVersionOne() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("old.db")
    try rawSQL(path, Self.versionOne)
    #expect(try rawUserVersion(path) == 1)

    let store = try SQLiteStore.open(path: path)
    let loaded = try store.load()
    #expect(loaded.epoch == "1d017e78d0a5d052")
    #expect(
      loaded.sessions == [
        StoredSession(
          id: "break",
          record: SessionRecord(
            .paused(remainingMs: 123_456), duration: 600, seq: 4, revision: 2,
            updatedAt: 1_796_021_000_000),
          keyHash: nil),
        StoredSession(
          id: "talk",
          record: SessionRecord(
            .running(endsAt: 1_796_024_364_226), duration: 2400, finishedLabel: "Time!", seq: 12,
            revision: 3, updatedAt: 1_796_021_964_226),
          keyHash: nil),
      ])
    let completions = Completions()
    store.onCompleted = completions.handler
    store.write(save("talk", loaded.sessions[1].record, key: KeyHash(of: "secret"), ticket: 1))
    _ = completions.wait(for: 1)
    store.close()
    #expect(try rawUserVersion(path) == Schema.version)
    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    #expect(try reopened.load().sessions.last?.keyHash == KeyHash(of: "secret"))
  }

  /// A version-3 file (before the waiting phase), as that version wrote it,
  /// frozen here: one row per phase, a keyed one, and one damaged row.
  static let versionThree = """
    CREATE TABLE sessions (
      id TEXT PRIMARY KEY NOT NULL,
      phase TEXT NOT NULL CHECK (phase IN ('idle', 'running', 'paused', 'finished')),
      duration INTEGER NOT NULL,
      ends_at INTEGER,
      remaining_ms INTEGER,
      finished_label TEXT,
      seq INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      key_hash BLOB CHECK (key_hash IS NULL OR length(key_hash) = 32)
    ) WITHOUT ROWID;
    CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE damaged_sessions (
      id, phase, duration, ends_at, remaining_ms, finished_label, seq, revision, updated_at,
      key_hash, reason TEXT NOT NULL, set_aside_at INTEGER NOT NULL
    );
    INSERT INTO meta VALUES ('epoch', '00c0ffee00c0ffee');
    INSERT INTO sessions VALUES ('talk', 'running', 2400, 1796024364226, NULL, 'Time!', 12, 3, 1796021964226, NULL);
    INSERT INTO sessions VALUES ('break', 'paused', 600, NULL, 123456, NULL, 4, 2, 1796021000000, NULL);
    INSERT INTO sessions VALUES ('over', 'finished', 60, NULL, NULL, 'Bye', 9, 5, 1796021000000, NULL);
    INSERT INTO sessions VALUES ('keyed', 'idle', 0, NULL, NULL, NULL, 1, 1, 1796021000000, x'\(String(repeating: "ab", count: 32))');
    INSERT INTO sessions VALUES ('bad', 'idle', 0, NULL, NULL, NULL, -1, 1, 1796021000000, NULL);
    INSERT INTO damaged_sessions VALUES ('old', 'bogus', 0, NULL, NULL, NULL, 0, 0, 0, NULL, 'unknown phase', 5);
    PRAGMA user_version = 3;
    """

  /// A version-3 file is migrated in place: every session loads as it was (a
  /// finished one as elapsed, a countdown's own end), the damaged row is set
  /// aside beside the one set aside before, and the new phase is stored in it.
  @Test func migratesVersionThree() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v3.db")
    try rawSQL(path, Self.versionThree)
    #expect(try rawUserVersion(path) == 3)

    let store = try SQLiteStore.open(path: path)
    let loaded = try store.load(now: 77)
    #expect(try rawUserVersion(path) == Schema.version)
    #expect(loaded.epoch == "00c0ffee00c0ffee")
    let keyHash = KeyHash(bytes: SIMD32(repeating: 0xab))
    #expect(
      loaded.sessions == [
        StoredSession(
          id: "break",
          record: SessionRecord(
            .paused(remainingMs: 123_456), duration: 600, seq: 4, revision: 2,
            updatedAt: 1_796_021_000_000), keyHash: nil),
        StoredSession(
          id: "keyed",
          record: SessionRecord(.idle, seq: 1, revision: 1, updatedAt: 1_796_021_000_000),
          keyHash: keyHash),
        StoredSession(
          id: "over",
          record: SessionRecord(
            .finished(.elapsed), duration: 60, finishedLabel: "Bye", seq: 9, revision: 5,
            updatedAt: 1_796_021_000_000), keyHash: nil),
        StoredSession(
          id: "talk",
          record: SessionRecord(
            .running(endsAt: 1_796_024_364_226), duration: 2400, finishedLabel: "Time!", seq: 12,
            revision: 3, updatedAt: 1_796_021_964_226), keyHash: nil),
      ])
    #expect(loaded.setAside.map(\.session) == ["bad"])

    // The migrated file takes the new phase: a wait from the finished session.
    let over = loaded.sessions[2].record
    let at: Int64 = 1_796_030_000_000
    let waiting = try over.applying(
      .wait(label: "Deploying", timeoutSeconds: 900, timeoutLabel: "Deploy timed out"), at: at
    ).get()
    let completions = Completions()
    store.onCompleted = completions.handler
    store.write(save("over", waiting, ticket: 1))
    _ = completions.wait(for: 1)
    store.close()

    let reopened = try SQLiteStore.open(path: path)
    defer { reopened.close() }
    let again = try reopened.load()
    #expect(again.setAside.isEmpty)
    let back = try #require(again.sessions.first { $0.id == "over" }?.record)
    #expect(back == waiting)
    #expect(back.status == .waiting(startedAt: at, timeoutAt: at + 900_000))
    #expect(back.waitLabel == "Deploying" && back.finishedLabel == "Deploy timed out")
    var damaged: [String] = []
    try Connection.open(path: path, readOnly: true).prepare(
      "SELECT id || ' ' || reason FROM damaged_sessions ORDER BY set_aside_at"
    ).query { row in damaged.append(row.text(0) ?? "") }
    #expect(damaged.count == 2 && damaged.first == "old unknown phase", "\(damaged)")
    #expect(damaged.last?.hasPrefix("bad ") == true, "\(damaged)")
  }

  /// A version-3 row with a phase the old CHECK refused (written with the
  /// check off) does not stop the migration: it is set aside, and the rest load.
  @Test func migrationSetsAsideARowItCannotCopy() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("v3-bogus.db")
    try rawSQL(
      path,
      Self.versionThree + """
        PRAGMA ignore_check_constraints = ON;
        INSERT INTO sessions VALUES ('weird', 'exploded', 0, NULL, NULL, NULL, 1, 1, 5, NULL);
        INSERT INTO sessions VALUES ('blobby', x'00', 0, NULL, NULL, NULL, 1, 1, 5, NULL);
        """)
    let before = Int64(Date().timeIntervalSince1970) * 1000
    let store = try SQLiteStore.open(path: path)
    defer { store.close() }
    let loaded = try store.load()
    #expect(loaded.sessions.map(\.id) == ["break", "keyed", "over", "talk"])
    var damaged: [String: Int64] = [:]
    try Connection.open(path: path, readOnly: true).prepare(
      "SELECT id || ' ' || reason, set_aside_at FROM damaged_sessions"
    ).query { row in damaged[row.text(0) ?? ""] = row.integer(1) }
    for name in ["weird unknown phase", "blobby unknown phase"] {
      #expect((damaged[name] ?? 0) >= before - 1000, "\(damaged)")
    }
  }

  /// Opening `path` fails with `kind`, and leaves the file byte for byte as it
  /// was and nothing new beside it. Returns the error for its message.
  func expectRefusal(
    _ path: String, in directory: TemporaryDirectory, kind: StoreError.Kind
  ) throws -> StoreError? {
    let before = FileManager.default.contents(atPath: path)
    let namesBefore = try directory.names()
    var refusal: StoreError?
    do {
      let store = try SQLiteStore.open(path: path)
      store.close()
    } catch {
      refusal = error
    }
    #expect(refusal?.kind == kind, "\(String(describing: refusal))")
    #expect(refusal?.description.contains(path) == true)
    #expect(FileManager.default.contents(atPath: path) == before)
    #expect(try directory.names() == namesBefore)
    return refusal
  }

  /// A file of garbage is refused as "not a SQLite database", unchanged.
  @Test(arguments: [4096, 100, 5])
  func refusesGarbage(size: Int) throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("garbage.db")
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
    #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    let refusal = try expectRefusal(path, in: directory, kind: .notADatabase)
    #expect(refusal?.description.contains("not a SQLite database") == true)
  }

  /// A file from a newer schema version is refused, naming both versions, unchanged.
  @Test func refusesNewerVersion() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("newer.db")
    try rawSQL(path, "CREATE TABLE future (x); PRAGMA user_version = \(Schema.version + 1);")
    let refusal = try expectRefusal(path, in: directory, kind: .newerSchema)
    #expect(refusal?.message.contains("version \(Schema.version + 1)") == true)
    #expect(refusal?.message.contains("version \(Schema.version),") == true)
  }

  /// Another program's SQLite database (tables, no schema version) is refused, unchanged.
  @Test func refusesForeignDatabase() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("photos.sqlite")
    try rawSQL(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    let refusal = try expectRefusal(path, in: directory, kind: .foreign)
    #expect(refusal?.message.contains("another program") == true)
  }

  /// An empty file (as `touch` leaves it) is a new database, not a refusal.
  @Test func adoptsEmptyFile() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("countdown.db")
    #expect(FileManager.default.createFile(atPath: path, contents: Data()))
    let store = try SQLiteStore.open(path: path)
    defer { store.close() }
    #expect(try store.load().sessions.isEmpty)
  }

  /// On a read-only filesystem both an existing file and a missing one are
  /// refused as read-only, and the existing file is unchanged.
  @Test(.enabled(if: Tmpfs.canMount, "mounting a tmpfs is refused on this machine"))
  func refusesReadOnly() throws {
    let mount = try Tmpfs(size: "1m")
    defer { mount.unmount() }
    let path = mount.directory.file("countdown.db")
    let store = try SQLiteStore.open(path: path)
    try store.saveEpoch("feedfacecafebeef")
    store.close()
    #expect(mount.remountReadOnly())

    let refusal = try expectRefusal(path, in: mount.directory, kind: .readOnly)
    #expect(refusal?.description.contains("cannot be written") == true)
    _ = try expectRefusal(mount.directory.file("missing.db"), in: mount.directory, kind: .readOnly)
  }

  /// A row this build cannot read (an unknown phase, a short key hash) is
  /// set aside under the session's name instead of restoring a wrong session.
  @Test(arguments: [
    ("phase = 'sleeping'", "unknown phase"), ("key_hash = x'0102'", "key_hash is not 32 bytes"),
  ])
  func setsAsideUnreadableRows(change: String, complaint: String) throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    fixture.store.write(save("team-a", SessionRecord(), ticket: 1))
    _ = fixture.completions.wait(for: 1)
    try rawSQL(
      fixture.path, "PRAGMA ignore_check_constraints = 1; UPDATE sessions SET \(change)")
    let loaded = try fixture.store.load()
    #expect(loaded.sessions.isEmpty)
    #expect(loaded.setAside.map(\.session) == ["team-a"])
    #expect(loaded.setAside.first?.reason.contains(complaint) == true)
  }

  /// A directory that does not exist is a clear error, not a crash.
  @Test func refusesMissingDirectory() throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let path = directory.file("no/such/dir/countdown.db")
    #expect {
      try SQLiteStore.open(path: path)
    } throws: { error in
      (error as? StoreError)?.kind == .cannotOpen && "\(error)".contains(path)
    }
  }
}

@Suite struct ClaimTests {
  /// A second store on a file another holds is refused as in use, naming the file, the
  /// lock file and this process's pid; once the first closes, the file opens again.
  @Test func refusesAFileInUse() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let error = #expect(throws: StoreError.self) { try SQLiteStore.open(path: fixture.path) }
    #expect(error?.kind == .inUse)
    #expect(error?.description.contains(fixture.path) == true)
    #expect(error?.description.contains(fixture.path + ".lock") == true)
    #expect(error?.description.contains("pid \(getpid())") == true)
    fixture.store.close()
    let reopened = try SQLiteStore.open(path: fixture.path)
    reopened.close()
  }

  /// A symbolic link to the database meets the same claim.
  @Test func refusesALinkToAFileInUse() throws {
    let fixture = try Fixture()
    defer { fixture.finish() }
    let link = fixture.directory.file("link.db")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: fixture.path)
    let error = #expect(throws: StoreError.self) { try SQLiteStore.open(path: link) }
    #expect(error?.kind == .inUse)
  }
}
