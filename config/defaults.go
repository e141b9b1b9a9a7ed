package config

import "time"

// The defaults, from RFC 9301 where it has them.
const (
	DefaultPort                = 4342
	DefaultControlSocket       = "/run/lispd.sock"
	DefaultRegistrationTimeout = 3 * time.Minute // 3x the 1-minute registration interval
	DefaultProxyReplyTTL       = 24 * time.Hour
	DefaultReplayWindow        = 5 * time.Minute // the clock skew tolerated between xTRs and map-server
	DefaultNegativeTTL         = 15 * time.Minute
	DefaultUnregisteredTTL     = time.Minute
	DefaultRateLimit           = 1000 // Map-Requests per second from one source
	DefaultRateBurst           = 2000
	DefaultKeyAlgorithm        = "hmac-sha256"
)

// Defaults fills in what the file left out.
func (c *Config) Defaults() {
	if len(c.Listen) == 0 {
		c.Listen = []string{"0.0.0.0", "::"}
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Control.Socket == "" {
		c.Control.Socket = DefaultControlSocket
	}
	if c.Has(RoleMapServer) && c.MapServer == nil {
		c.MapServer = &MapServer{}
	}
	if ms := c.MapServer; ms != nil {
		setDuration(&ms.RegistrationTimeout, DefaultRegistrationTimeout)
		setDuration(&ms.ProxyReplyTTL, DefaultProxyReplyTTL)
		setDuration(&ms.ReplayWindow, DefaultReplayWindow)
		for i := range ms.Sites {
			s := &ms.Sites[i]
			setBool(&s.ProxyReply, true)
			setBool(&s.AntiReplay, true)
			for j := range s.Keys {
				if s.Keys[j].Algorithm == "" {
					s.Keys[j].Algorithm = DefaultKeyAlgorithm
				}
			}
		}
	}
	if c.Has(RoleMapResolver) && c.MapResolver == nil {
		c.MapResolver = &MapResolver{}
	}
	if mr := c.MapResolver; mr != nil {
		setDuration(&mr.NegativeTTL, DefaultNegativeTTL)
		setDuration(&mr.UnregisteredTTL, DefaultUnregisteredTTL)
		if mr.RateLimit == nil {
			mr.RateLimit = &RateLimit{PerSecond: DefaultRateLimit, Burst: DefaultRateBurst}
		}
	}
	c.tunnelDefaults()
	c.ddtDefaults()
	c.teDefaults()
}

func setBool(b **bool, def bool) {
	if *b == nil {
		*b = &def
	}
}

func setDuration(d *Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}
