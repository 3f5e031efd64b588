extension DeviceSession {
    /// How `open` obtained its device.
    public enum Origin: Sendable, Equatable {
        /// Loaded from the state file.
        case stateFile
        /// Created with a fresh key and registered.
        case registered(DeviceRegistration)
    }

    /// Opens the device saved at `statePath`; when there is none, creates one, registers it
    /// through the admin API and saves it (only once the gateway accepted it).
    ///
    /// `teamID`/`bundleID` default to the saved device's; given ones must match it.
    public static func open(configuration: DeviceSessionConfiguration, statePath: String,
                            teamID: String?, bundleID: String?, defaultTeamID: String, defaultBundleID: String,
                            creatingIfMissing: Bool) throws(DeviceError) -> (session: DeviceSession, origin: Origin) {
        if let device = try SimulatedDevice.load(from: statePath) {
            if let teamID, teamID != device.teamID {
                throw .state(path: statePath, reason: "holds a device of team \(device.teamID), not \(teamID)")
            }
            if let bundleID, bundleID != device.bundleID {
                throw .state(path: statePath, reason: "holds a device of bundle \(device.bundleID), not \(bundleID)")
            }
            return (DeviceSession(configuration: configuration, device: device, statePath: statePath), .stateFile)
        }
        guard creatingIfMissing else {
            throw .state(path: statePath, reason: "no device state: run `attestgate-device register` first")
        }
        let device = try SimulatedDevice(teamID: teamID ?? defaultTeamID, bundleID: bundleID ?? defaultBundleID)
        let session = DeviceSession(configuration: configuration, device: device, statePath: statePath)
        let registration = try session.register()
        return (session, .registered(registration))
    }
}
