import SecurityProtocol

/// The program the keychain requests of the current task or thread are made on behalf of (nil: the caller's own):
/// `lactl secret-service` sets it around the keychain calls it makes for a D-Bus client, so that items' trusted-
/// application lists are checked against that client and "the calling program" in a new item's list names it.
/// Only an administrative tool may use it; localauthd identifies the process itself and refuses anyone else.
package enum KeychainSubject {
    @TaskLocal package static var current: ProcessReference?
}
