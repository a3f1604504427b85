package discovery

import "github.com/labstack/echo/v4"

func (m *Module) getFeed(c echo.Context) error { return nil }
